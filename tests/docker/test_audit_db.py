"""The PostgreSQL audit proxy program in front of a real PostgreSQL 15, with real clients: psql
(simple protocol, SCRAM auth, SSL negotiation refused by the proxy), pgbench `-M extended` and
`-M prepared` (libpq's extended protocol) and a pipelined stdlib wire client (several
Parse/Bind/Execute before one Sync, an error in the middle)."""
from __future__ import annotations

import json

import pytest

from tests.support.proxyenv import PG, PGWIRE, PY, Lab, events, sh, wait_for, wait_port

PASSWORD = "pw-Secret-42"
URL = f"postgresql://postgres:{PASSWORD}@db/postgres"


@pytest.fixture(scope="module")
def lab(docker_client, stock_images):
    lab = Lab(docker_client, "svc-pgaudit")
    try:
        net = lab.network("inner")
        lab.start(PG, network=net, aliases=["db-upstream"], environment={"POSTGRES_PASSWORD": PASSWORD})
        _, audit = lab.proxy("pg", {"listen": "0.0.0.0:5432", "upstream": "db-upstream:5432", "service": "db"},
                             network=net, aliases=["db"])
        client = lab.start(PY, ["sleep", "infinity"], network=net, aliases=["sandbox"],
                           volumes={str(PGWIRE): {"bind": "/pgwire.py", "mode": "ro"}})
        bench = lab.start(PG, ["sleep", "infinity"], network=net, environment={"PGPASSWORD": PASSWORD})
        wait_port(client, "db", 5432)
        code, out = sh(client, "for i in $(seq 1 120); do pg_isready -q -h db-upstream && exit 0; sleep 0.5; done; exit 1", 90)
        assert code == 0, out
        code, out = sh(client, f"psql -X -v ON_ERROR_STOP=1 {URL} -c 'create table items (n int); create table other (n int)'")
        assert code == 0, out
        lab.client, lab.bench, lab.audit = client, bench, audit
        yield lab
    finally:
        lab.close()


def writes(lab, since: int = 0) -> list[dict]:
    return [e["details"] for e in events(lab.audit, "db_write")][since:]


def summary(ws: list[dict]) -> list[tuple]:
    return [(w["table"], w["operation"], w["row_count"], w["committed"]) for w in ws]


def test_psql_simple_protocol_insert_update(lab):
    before = len(writes(lab))
    code, out = sh(lab.client, f"psql -X -v ON_ERROR_STOP=1 {URL} -c 'INSERT INTO items SELECT generate_series(1, 3)' "
                               "-c 'UPDATE items SET n = n + 100 WHERE n <= 2'")
    assert code == 0 and "INSERT 0 3" in out and "UPDATE 2" in out, out
    got = wait_for(lambda: writes(lab, before) if len(writes(lab, before)) >= 2 else None)
    assert summary(got) == [("items", "insert", 3, True), ("items", "update", 2, True)]
    assert all(w["service"] == "db" and w["ts"].endswith("Z") for w in got)
    assert got[0]["statement"] == "INSERT INTO items SELECT generate_series(1, 3)"


def test_psql_several_statements_copy_and_rollback(lab):
    before = len(writes(lab))
    script = ("DELETE FROM other; INSERT INTO other VALUES (1), (2); "
              "BEGIN; DELETE FROM items WHERE n > 100; ROLLBACK;\n"
              "\\copy other FROM stdin\n7\n8\n9\n\\.\n")
    code, out = sh(lab.client, f"psql -X -v ON_ERROR_STOP=1 {URL} <<'EOF'\n{script}EOF")
    assert code == 0, out
    got = wait_for(lambda: writes(lab, before) if len(writes(lab, before)) >= 4 else None)
    assert summary(got) == [("other", "delete", 0, True), ("other", "insert", 2, True), ("items", "delete", 2, False),
                            ("other", "insert", 3, True)]
    assert got[-1]["command"] == "COPY"


@pytest.mark.parametrize("mode", ["extended", "prepared"])
def test_pgbench_extended_protocol(lab, mode):
    before = len(writes(lab))
    script = "INSERT INTO other SELECT g FROM generate_series(1, 3) g;\\nUPDATE other SET n = n + 1 WHERE n <= 2;\\n"
    code, out = sh(lab.bench, f"printf '{script}' > /tmp/s.sql && pgbench -n -t 1 -M {mode} -f /tmp/s.sql "
                              "-h db -U postgres postgres")
    assert code == 0, out
    got = wait_for(lambda: writes(lab, before) if len(writes(lab, before)) >= 2 else None)
    # INSERT of 3 rows; the UPDATE hits the 2 fresh rows with n <= 2 plus earlier ones: count from the tag
    assert summary(got)[0] == ("other", "insert", 3, True)
    assert got[1]["table"] == "other" and got[1]["operation"] == "update" and got[1]["row_count"] >= 2
    code, out = sh(lab.client, f"psql -X -At {URL} -c 'select count(*) from other where n <= 2'")
    assert code == 0


def test_pipelined_extended_protocol_with_an_error(lab):
    before = len(writes(lab))
    batches = [
        [["INSERT INTO items SELECT generate_series(1, $1::int)", [3]], ["UPDATE items SET n = n WHERE n <= $1", [2]],
         ["SELECT count(*) FROM items", []]],
        [["INSERT INTO other VALUES ($1)", [5]], ["SELECT * FROM missing_table", []], ["DELETE FROM other", []]],
    ]
    code, out = sh(lab.client, f"python3 /pgwire.py db 5432 postgres {PASSWORD} postgres <<'EOF'\n{json.dumps(batches)}\nEOF")
    assert code == 0, out
    results = [json.loads(line) for line in out.splitlines()]
    assert results[0]["tags"][:1] == ["INSERT 0 3"] and results[1]["errors"], results
    got = wait_for(lambda: writes(lab, before) if len(writes(lab, before)) >= 3 else None)
    upd = got[1]
    assert summary(got)[0] == ("items", "insert", 3, True)
    assert (upd["table"], upd["operation"], upd["committed"]) == ("items", "update", True)
    assert upd["row_count"] == int(results[0]["tags"][1].split()[-1])
    # the second batch failed in the middle: its insert was rolled back, its delete never ran
    assert summary(got[2:]) == [("other", "insert", 1, False)]


def test_password_never_in_audit_and_proxy_is_transparent(lab):
    code, out = sh(lab.client, f"psql -X -At {URL} -c 'show server_version' -c 'select current_user'")
    assert code == 0 and out.splitlines()[-1] == "postgres", out
    code, out = sh(lab.client, f"psql -X 'postgresql://postgres:wrong@db/postgres' -c 'select 1'")
    assert code != 0 and "password authentication failed" in out, out
    assert PASSWORD not in lab.audit.read_text()
