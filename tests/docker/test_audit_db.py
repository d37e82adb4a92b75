"""`audit.db_writes` inside PostgreSQL (daemon/sandbox/db_audit.py), on a real sandbox booted
through the daemon's API: the agent connects as the non-superuser role `agent`, and each committed
transaction's writes become one `db_write` per table and operation, with its row count and the
commit's timestamp. Rolled-back writes are never audited (they never reach the server's logical
decoding), nor are the fixtures' writes (they happen before the audit starts); a pooled sandbox
starts its audit when a run claims it."""
from __future__ import annotations

import pytest
import pytest_asyncio

from tests.support.api import start_api, stop_api
from tests.support.audit import audit_events, wait_audit
from tests.support.specs import spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

PSQL = 'psql -X -q -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL"'
AUDITED = spec(
    "db-audited",
    services=[{"name": "db", "type": "postgres"}],
    fixtures=[{"service": "db", "sql": "CREATE TABLE items (id serial PRIMARY KEY, n int); CREATE TABLE other (n int); "
                                       "INSERT INTO items (n) SELECT g FROM generate_series(1, 5) g;"}],
    audit={"db_writes": True},
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api):
    body = await api.create_from_spec(AUDITED)
    assert body["state"] == "ready", body
    return body["id"]


def writes(api, sid: str) -> list[dict]:
    return [e for e in audit_events(api, sid, "db_write")]


async def marker(api, sid: str, n: int) -> None:
    """A committed write of its own, waited for: everything committed before it is audited by then."""
    out = await api.run(sid, f"{PSQL} -c 'INSERT INTO other VALUES ({n})'")
    assert out["exit_code"] == 0, out
    await wait_audit(api, sid, "db_write", lambda d: d["table"] == "other", n=len(
        [w for w in writes(api, sid) if w["details"]["table"] == "other"]) + 1)


async def test_the_agent_is_not_the_superuser(api, sandbox):
    out = await api.run(sandbox, f"echo $SERVICE_SERVICE_DB_USER; {PSQL} -At -c 'SELECT current_user, rolsuper FROM pg_roles "
                                 "WHERE rolname = current_user'")
    assert out["stdout"].split() == ["agent", "agent|f"], out


async def test_fixture_rows_are_the_agents_to_change_but_not_audited(api, sandbox):
    out = await api.run(sandbox, f"{PSQL} -At -c 'SELECT count(*) FROM items'")
    assert out["stdout"].strip() == "5", out
    assert not [w for w in writes(api, sandbox) if w["details"]["table"] == "items" and w["details"]["row_count"] == 5]


async def test_committed_writes_with_row_counts_and_commit_time(api, sandbox):
    before = len(writes(api, sandbox))
    out = await api.run(sandbox, f"{PSQL} -c 'BEGIN' -c 'INSERT INTO items (n) SELECT g FROM generate_series(1, 3) g' "
                                 "-c 'UPDATE items SET n = n + 100 WHERE n <= 2' -c 'COMMIT' -c 'DELETE FROM items WHERE n > 100'")
    assert out["exit_code"] == 0, out
    got = await wait_audit(api, sandbox, "db_write", lambda d: d["table"] == "items", n=3)
    new = [w for w in writes(api, sandbox)[before:] if w["details"]["table"] == "items"]
    assert [(w["details"]["operation"], w["details"]["row_count"]) for w in new] == [("insert", 3), ("update", 4), ("delete", 4)]
    assert got[0]["ts"] == got[1]["ts"] and got[0]["ts"].endswith("Z")  # one transaction: one commit time
    assert all(w["details"]["service"] == "db" and w["details"]["committed"] for w in new)


async def test_rolled_back_writes_are_not_audited(api, sandbox):
    out = await api.run(sandbox, f"{PSQL} -c 'CREATE TABLE scratch (n int)' -c 'BEGIN' -c 'INSERT INTO scratch VALUES (1)' "
                                 "-c 'ROLLBACK'")
    assert out["exit_code"] == 0, out
    await marker(api, sandbox, 1)
    # the CREATE TABLE committed on its own (a `ddl` event); the rolled-back insert left nothing
    assert not [w for w in writes(api, sandbox) if w["details"]["table"] == "scratch" and w["details"]["operation"] != "ddl"]


async def test_copy_counts_as_insert_and_truncate_as_delete(api, sandbox):
    out = await api.run(sandbox, f"printf '7\\n8\\n9\\n' | {PSQL} -c '\\copy other FROM stdin' && {PSQL} -c 'TRUNCATE other'")
    assert out["exit_code"] == 0, out
    got = await wait_audit(api, sandbox, "db_write", lambda d: d["table"] == "other" and d["command"] == "TRUNCATE")
    tail = [(w["details"]["operation"], w["details"]["row_count"]) for w in writes(api, sandbox)
            if w["details"]["table"] == "other"][-2:]
    assert got and tail == [("insert", 3), ("delete", None)]


async def test_odd_table_names_and_a_truncate_of_two_tables(api, sandbox):
    """A name the agent chose can neither break the audit nor hide a table of a multi-table TRUNCATE."""
    sql = 'CREATE TABLE "we, ird.""name" (n int);\nINSERT INTO "we, ird.""name" VALUES (1);\nTRUNCATE other, "we, ird.""name";\n'
    out = await api.run(sandbox, f"cat > /tmp/odd.sql <<'EOF'\n{sql}EOF\n{PSQL} -f /tmp/odd.sql")
    assert out["exit_code"] == 0, out
    await wait_audit(api, sandbox, "db_write", lambda d: d["command"] == "TRUNCATE" and d["table"] == 'we, ird."name')
    odd = [(w["details"]["table"], w["details"]["operation"], w["details"]["row_count"]) for w in writes(api, sandbox)
           if w["details"]["table"] in ("other", 'we, ird."name')][-3:]
    assert odd == [('we, ird."name', "insert", 1), ("other", "delete", None), ('we, ird."name', "delete", None)]


async def test_a_pooled_sandbox_audits_from_its_claim_on(stock_images):
    """Booted ahead of any run: the role's password is the run's, set at the claim with a fresh slot."""
    pool_api = await start_api(pool_size=1)
    try:
        doc = spec("db-audited-pooled", **{k: v for k, v in AUDITED.items() if k in ("services", "fixtures", "audit")})
        first = await pool_api.create_from_spec(doc)
        assert first["state"] == "ready" and first["boot"]["pooled"] is False, first

        async def pooled():
            response, body = await pool_api.get("/v1/health")
            return sum(body["sandbox_pool"]["pooled"].values()) >= 1 or None

        await wait_for(pooled, timeout=120, what="a pooled sandbox", interval=0.2)
        second = await pool_api.create_from_spec(doc)
        assert second["state"] == "ready" and second["boot"]["pooled"] is True, second
        out = await pool_api.run(second["id"], f"{PSQL} -At -c 'SELECT current_user' -c 'INSERT INTO other VALUES (1), (2)'")
        assert out["exit_code"] == 0 and out["stdout"].split() == ["agent"], out
        got = await wait_audit(pool_api, second["id"], "db_write")
        assert [(w["details"]["table"], w["details"]["operation"], w["details"]["row_count"]) for w in got] == [
            ("other", "insert", 2)]
    finally:
        await stop_api(pool_api)
