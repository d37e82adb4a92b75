"""The agent cannot escape the db audit (daemon/sandbox/db_audit.py): as the role `agent` every
way of writing past logical decoding or of silencing it is refused, and its writes are still
audited afterwards."""
from __future__ import annotations

import pytest
import pytest_asyncio

from tests.support.audit import wait_audit
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

PSQL = 'psql -X -q -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL"'
AUDITED = spec(
    "db-escape",
    services=[{"name": "db", "type": "postgres"}],
    fixtures=[{"service": "db", "sql": "CREATE TABLE items (n int);"}],
    forbidden={"db_writes_outside": []},
    audit={"db_writes": True},
)
ATTEMPTS = {
    "drop_slot": "SELECT pg_drop_replication_slot('svc_audit')",
    "read_slot": "SELECT * FROM pg_logical_slot_get_changes('svc_audit', NULL, NULL)",
    "advance_slot": "SELECT pg_replication_slot_advance('svc_audit', pg_current_wal_lsn())",
    "alter_system": "ALTER SYSTEM SET wal_level = minimal",
    "replication_role": "SET session_replication_role = replica",
    "replication_role_db": "ALTER DATABASE postgres SET session_replication_role = replica",
    "grant_replication": "ALTER ROLE agent REPLICATION",
    "grant_superuser": "ALTER ROLE agent SUPERUSER",
    "unlogged_table": "CREATE UNLOGGED TABLE hidden (n int)",
    "unlogged_table_as": "CREATE UNLOGGED TABLE hidden AS SELECT 1 AS n",
    "set_unlogged": "ALTER TABLE items SET UNLOGGED",
    "unlogged_sequence": "CREATE UNLOGGED SEQUENCE hidden_seq",
    "drop_schema": "DROP SCHEMA svc_audit CASCADE",
    "drop_function": "DROP FUNCTION svc_audit.refuse_unlogged()",
    "replace_function": "CREATE OR REPLACE FUNCTION svc_audit.refuse_unlogged() RETURNS event_trigger "
                        "LANGUAGE plpgsql AS $$ BEGIN END $$",
    "drop_trigger": "DROP EVENT TRIGGER svc_audit_refuse_unlogged",
    "disable_trigger": "ALTER EVENT TRIGGER svc_audit_refuse_unlogged DISABLE",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api):
    body = await api.create_from_spec(AUDITED)
    assert body["state"] == "ready", body
    return body["id"]


@pytest.mark.parametrize("name", sorted(ATTEMPTS))
async def test_attempt_is_refused(api, sandbox, name):
    sql = ATTEMPTS[name].replace("'", "'\\''")
    out = await api.run(sandbox, f"{PSQL} -c '{sql}'")
    assert out["exit_code"] != 0, out


async def test_dropping_the_database_with_its_slot_is_refused(api, sandbox):
    out = await api.run(sandbox, 'psql -X -v ON_ERROR_STOP=1 "${SERVICE_SERVICE_DB_URL%/*}/template1" '
                                 "-c 'DROP DATABASE postgres'")
    assert out["exit_code"] != 0 and "must be owner" in out["stderr"], out


async def test_writes_are_still_audited_after_the_attempts(api, sandbox):
    for name in sorted(ATTEMPTS):
        sql = ATTEMPTS[name].replace("'", "'\\''")
        await api.run(sandbox, f"{PSQL} -c '{sql}'")
    out = await api.run(sandbox, f"{PSQL} -c 'INSERT INTO items VALUES (1), (2)'")
    assert out["exit_code"] == 0, out
    got = await wait_audit(api, sandbox, "db_write", lambda d: d["table"] == "items")
    assert [(w["details"]["operation"], w["details"]["row_count"]) for w in got] == [("insert", 2)]
