"""The db audit reads a burst in bounded chunks (daemon/sandbox/db_audit.py): 40,000 committed
transactions between two reads, far more than one read's output may hold under the exec output
cap, all become `db_write` events, in commit order, the last one included."""
from __future__ import annotations

import pytest

from daemon.sandbox import db_audit
from daemon.sandbox.engine.docker import DockerDriver
from tests.support.proxyenv import PG, Lab, sh

pytestmark = pytest.mark.docker

BURST = 40_000
WRITES = ("SET synchronous_commit = off;\n"
          "DO $$ BEGIN FOR i IN 1..%d LOOP INSERT INTO items VALUES (i); COMMIT; END LOOP; END $$;\n"
          "INSERT INTO last_one VALUES (1);\n" % BURST)


@pytest.fixture
def server(stock_images, docker_client):
    lab = Lab(docker_client, "svc-audit-burst")
    try:
        net = lab.network("db")
        container = lab.start(PG, ["postgres", *db_audit.SERVER_ARGS], network=net, environment={"POSTGRES_PASSWORD": "pw"})
        code, out = sh(container, "for i in $(seq 1 120); do pg_isready -q && break; sleep 0.5; done; "
                                  "psql -X -q -U postgres -c 'CREATE TABLE items (n int); CREATE TABLE last_one (n int)'",
                       timeout=120)
        assert code == 0, out
        yield container
    finally:
        lab.close()


async def test_a_burst_larger_than_one_read_is_audited_whole(server):
    driver = DockerDriver(max_workers=4)
    events: list[tuple[str, dict, str]] = []
    try:
        await db_audit.prepare(driver, server.id, "db", "postgres", "postgres", "apw")
        code, out = sh(server, f"PGPASSWORD=apw psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U agent postgres <<'EOF'\n{WRITES}EOF",
                       timeout=300)
        assert code == 0, out
        reader = db_audit.DbAuditReader(driver, server.id, "db", "postgres", "postgres",
                                        lambda kind, details, ts: events.append((kind, details, ts)))
        await reader.poll()
    finally:
        await driver.close()
    tables = [(kind, details["table"]) for kind, details, _ in events]
    assert tables == [("db_write", "items")] * BURST + [("db_write", "last_one")]
