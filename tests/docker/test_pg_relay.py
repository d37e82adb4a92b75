"""The db audit proxy's compiled relay (programs/pg_relay.c in the stock python image) in front of
a real PostgreSQL 15: it is the path the stock image takes, read-only cycles it keeps from the
auditor do not shift which statement a write is recorded with, values past its hold limit pass
unchanged, stopping the proxy still records an open transaction's writes, and without the binary
the proxy forwards in Python."""
from __future__ import annotations

import hashlib

import pytest

from tests.support.proxyenv import PG, PY, Lab, events, sh, wait_for, wait_port

PASSWORD = "pw-Relay-7"
PG_CONFIG = {"listen": "0.0.0.0:5432", "upstream": "db-upstream:5432", "service": "db"}


@pytest.fixture(scope="module")
def lab(docker_client, stock_images):
    lab = Lab(docker_client, "svc-pgrelay")
    try:
        net = lab.network("inner")
        lab.start(PG, network=net, aliases=["db-upstream"], environment={"POSTGRES_PASSWORD": PASSWORD})
        lab.proxy_container, lab.audit = lab.proxy("pg", PG_CONFIG, network=net, aliases=["db"])
        client = lab.start(PG, ["sleep", "infinity"], network=net, environment={"PGPASSWORD": PASSWORD})
        code, out = sh(client, "for i in $(seq 1 120); do pg_isready -q -h db-upstream && exit 0; sleep 0.5; done; exit 1", 90)
        assert code == 0, out
        py = lab.start(PY, ["sleep", "infinity"], network=net)
        wait_port(py, "db", 5432)
        code, out = psql(client, "db", "CREATE TABLE items (n int); CREATE TABLE big (v text)")
        assert code == 0, out
        lab.net, lab.pg, lab.py = net, client, py
        yield lab
    finally:
        lab.close()


def psql(client, host: str, script: str, *flags: str) -> tuple[int, str]:
    return sh(client, f"psql -X -v ON_ERROR_STOP=0 {' '.join(flags)} -h {host} -U postgres postgres <<'EOF'\n{script}\nEOF",
              timeout=120)


def writes(path, since: int = 0) -> list[dict]:
    return [e["details"] for e in events(path, "db_write")][since:]


def test_the_stock_image_proxy_runs_the_compiled_relay(lab):
    assert "compiled relay /usr/local/bin/svc-pg-relay" in lab.proxy_container.logs().decode()


def test_reads_between_writes_leave_each_write_with_its_own_statement(lab):
    before = len(writes(lab.audit))
    script = "\n".join([
        "SELECT count(*) FROM items;",
        "INSERT INTO items VALUES (1);",
        "SELECT 1;", "SET application_name = 'x';",
        "BEGIN;", "SELECT 2;", "UPDATE items SET n = 2 WHERE n = 1;", "SELECT 3;", "COMMIT;",
        "SELECT * FROM missing_table;",
        "SELECT 4;",
        "DELETE FROM items WHERE n = 2;",
    ])
    code, out = psql(lab.pg, "db", script)
    assert code == 0 and "DELETE 1" in out, out
    got = wait_for(lambda: writes(lab.audit, before) if len(writes(lab.audit, before)) >= 3 else None)
    assert [(w["statement"], w["row_count"], w["committed"]) for w in got] == [
        ("INSERT INTO items VALUES (1)", 1, True),
        ("UPDATE items SET n = 2 WHERE n = 1", 1, True),
        ("DELETE FROM items WHERE n = 2", 1, True),
    ]


def test_a_statement_prepared_in_a_read_only_cycle_names_the_later_write(lab):
    """pgbench -M prepared prepares each command in a cycle of its own (Parse + Sync), which the
    relay keeps from the auditor; the writes executed from it later still carry its text."""
    before = len(writes(lab.audit))
    code, out = sh(lab.pg, "printf 'SELECT count(*) FROM items;\\nINSERT INTO items VALUES (7);\\n' > /tmp/p.sql && "
                               "pgbench -n -t 3 -M prepared -f /tmp/p.sql -h db -U postgres postgres", timeout=120)
    assert code == 0, out
    got = wait_for(lambda: writes(lab.audit, before) if len(writes(lab.audit, before)) >= 3 else None)
    assert [(w["table"], w["statement"]) for w in got] == [("items", "INSERT INTO items VALUES (7);")] * 3


BIG_SQL = """import sys
sys.stdout.write("INSERT INTO big VALUES ('" + "".join(f"{i:07d}" for i in range(1000000)) + "');")
"""


def test_values_past_the_hold_limit_pass_unchanged_and_are_audited(lab):
    """A 7 MB statement (the relay holds at most 4 MB per connection, then passes everything on as
    it arrives) and the 7 MB row read back."""
    before = len(writes(lab.audit))
    value = "".join(f"{i:07d}" for i in range(1_000_000))
    code, out = sh(lab.py, f"python3 - > /tmp/big.sql <<'EOF'\n{BIG_SQL}EOF\n"
                           f"psql -X -q -v ON_ERROR_STOP=1 postgresql://postgres:{PASSWORD}@db/postgres -f /tmp/big.sql && "
                           f"psql -X -At postgresql://postgres:{PASSWORD}@db/postgres -c 'SELECT v FROM big' | tr -d '\\n' "
                           "| md5sum", timeout=180)
    assert code == 0, out
    assert out.split()[-2] == hashlib.md5(value.encode()).hexdigest()
    code, out = psql(lab.pg, "db", "DELETE FROM big;")
    assert code == 0, out
    got = wait_for(lambda: writes(lab.audit, before) if len(writes(lab.audit, before)) >= 2 else None)
    assert [(w["table"], w["operation"], w["row_count"]) for w in got] == [("big", "insert", 1), ("big", "delete", 1)]


def test_stopping_the_proxy_records_an_open_transaction_as_not_committed(lab):
    proxy, audit = lab.proxy("pg", PG_CONFIG, network=lab.net, aliases=["db-stop"])
    code, out = sh(lab.pg, "for i in $(seq 1 100); do pg_isready -q -h db-stop && break; sleep 0.2; done; "
                               "(printf 'BEGIN;\\nINSERT INTO items VALUES (42);\\n'; sleep 120) "
                               "| psql -X -h db-stop -U postgres postgres >/dev/null 2>&1 &")
    assert code == 0, out
    wait_for(lambda: sh(lab.pg, "psql -X -At -h db-upstream -U postgres postgres -c \"SELECT count(*) FROM "
                                    "pg_stat_activity WHERE state = 'idle in transaction'\"")[1].strip() == "1" or None)
    proxy.stop(timeout=20)
    assert [(w["statement"], w["committed"]) for w in writes(audit)] == [("INSERT INTO items VALUES (42)", False)]


def test_without_the_binary_the_proxy_forwards_in_python(lab):
    proxy, audit = lab.proxy("pg", {**PG_CONFIG, "relay": "/usr/local/bin/no-such-relay"}, network=lab.net,
                             aliases=["db-python"])
    code, out = sh(lab.pg, "for i in $(seq 1 100); do pg_isready -q -h db-python && break; sleep 0.2; done; "
                               "psql -X -h db-python -U postgres postgres -c 'INSERT INTO items VALUES (5)'")
    assert code == 0 and "INSERT 0 1" in out, out
    got = wait_for(lambda: writes(audit) or None)
    assert [(w["statement"], w["committed"]) for w in got] == [("INSERT INTO items VALUES (5)", True)]
    assert "no compiled relay at /usr/local/bin/no-such-relay, Python forwarding" in proxy.logs().decode()
