"""`db_write` audit inside PostgreSQL itself (spec `audit.db_writes`, `forbidden.db_writes_outside`).

The server runs with `wal_level=logical`; the agent connects as its own role `agent`
(NOSUPERUSER, NOREPLICATION, with CREATE on the database and owner of every schema and table the
fixtures created; not the database's owner, who could drop it and its slot), never
as the superuser, whose password it does not get. A `test_decoding` slot created just before the
setup commands (a pooled sandbox: when it is claimed) holds every committed change from then on;
`DbAuditReader` drains it from inside the service container (`psql` as the superuser on the local
socket) every `POLL_S`, at the agent's end and at teardown, and records one `db_write` per
committed transaction, table and operation: `{service, schema, table, operation, row_count,
command, committed: true}` stamped with the commit's time; for a table with a primary key also
`key_columns` and `keys`, the key values of the first `KEY_SAMPLE` changed rows (each cut to
`KEY_CHARS` characters; `keys_more` when the transaction changed more rows than were read for keys).
No other row value leaves the server.
Each read decodes at most `CHUNK_CHANGES` changes (ending on a transaction's end) and a drain
reads again until the slot is behind by less, so the output of one read stays far below the exec
output cap however much the agent wrote: a write is never cut off by the cap (and if one read still
overflowed it, a `warning` event says so).

What the agent cannot do as `agent` (tests/docker/test_audit_escape.py): drop the database, drop,
read or advance the slot, ALTER SYSTEM, SET session_replication_role, give itself REPLICATION or SUPERUSER, or touch
the `svc_audit` schema, whose event trigger refuses UNLOGGED tables and sequences (logical
decoding does not see their writes).
Not audited: rolled-back writes (they never reach the slot), temporary tables (gone with the
session), large objects and sequence increments.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Callable

from daemon.sandbox.engine import OUTPUT_CAP_BYTES, RawExec, SandboxDriver
from daemon.sandbox.models import BootFailure

if TYPE_CHECKING:
    from daemon.spec.models import SpecDocument

log = logging.getLogger("svcd.sandbox.db_audit")

AGENT_ROLE = "agent"
CHECK_ROLE = "svc_check"  # the `sql` checks' role: reads everything, writes nothing, fixed search_path
DDL_PREFIX = "svc_ddl"  # the logical message the DDL event trigger emits
# Every superuser session of the daemon's resolves names in pg_catalog only: a function or operator
# the agent made in `public` is never picked for it (an overload can match better than a built-in).
SUPERUSER_ENV = {"PGOPTIONS": "-c search_path=pg_catalog,pg_temp"}
SLOT = "svc_audit"
# Every read costs a `docker exec`, a backend and a restart of decoding from the slot's restart point:
# reading each 0.5 s cost pgbench 19% of its TPS on 2 cores, each 1 s 14-17%, each 2 s 9%
# (tests/bench/bench_proxies.py). Live db_write events lag by up to this; the agent's end reads all.
POLL_S = 2.0
CHUNK_CHANGES = 20000  # decoded rows per read (BEGIN/COMMIT included): ~13k output lines of < 250 bytes
DECODE_OUTPUT_CAP = 8 * 1024 * 1024
SERVER_ARGS = ["-c", "wal_level=logical", "-c", "max_replication_slots=4", "-c", "max_wal_senders=4"]


def needs_db_audit(spec: SpecDocument | None) -> bool:
    """Whether the sandbox's postgres services audit their writes."""
    if spec is None:
        return False
    from daemon.spec.checks import sees_effects

    return bool(spec.audit.db_writes) or spec.forbidden.sees_db_writes() or sees_effects(spec.invariants, "db")


def server_command(command: list[str] | None) -> list[str] | None:
    """The service's command with logical decoding on; None for a command that does not start the
    server through the image's entrypoint (then `start` refuses it, naming wal_level)."""
    if command is None:
        return ["postgres", *SERVER_ARGS]
    if command[0] == "postgres" or command[0].startswith("-"):
        return [*command, *SERVER_ARGS]
    return command


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def setup_sql(superuser: str, database: str, password: str) -> str:
    """Run as the superuser: the agent's role with DML grants on what the fixtures made (never
    ownership: only an owner can rename, rewrite, drop or replace a table, so the agent cannot
    swap tables under the audit or the checks), the checks' read-only role, and the event triggers
    (UNLOGGED refused; the agent's DDL on its own new objects audited). Idempotent."""
    role, su, check = _ident(AGENT_ROLE), _ident(superuser), _ident(CHECK_ROLE)
    dml = "SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES"
    return f"""
DO $$ BEGIN
  IF current_setting('wal_level') <> 'logical' THEN
    RAISE EXCEPTION 'wal_level is %, the db audit needs logical (the service''s command must start the server with the image''s entrypoint)', current_setting('wal_level');
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {_literal(AGENT_ROLE)}) THEN
    CREATE ROLE {role};
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {_literal(CHECK_ROLE)}) THEN
    CREATE ROLE {check};
  END IF;
END $$;
ALTER ROLE {role} WITH LOGIN NOSUPERUSER NOREPLICATION NOCREATEROLE NOCREATEDB NOBYPASSRLS PASSWORD {_literal(password)};
ALTER ROLE {check} WITH LOGIN NOSUPERUSER NOREPLICATION NOCREATEROLE NOCREATEDB NOBYPASSRLS PASSWORD NULL;
GRANT pg_read_all_data TO {check};
ALTER ROLE {check} SET default_transaction_read_only = on;
ALTER ROLE {check} SET search_path = pg_catalog, public;
GRANT CREATE, CONNECT, TEMPORARY ON DATABASE {_ident(database)} TO {role};
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT c.oid::regclass AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relpersistence = 'u' AND c.relkind IN ('r', 'p') AND n.nspname NOT LIKE 'pg\\_%' LOOP
    EXECUTE format('ALTER TABLE %s SET LOGGED', r.rel);
  END LOOP;
  FOR r IN SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'svc_audit') LOOP
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO {role}', r.nspname);
    EXECUTE format('GRANT {dml} ON ALL TABLES IN SCHEMA %I TO {role}', r.nspname);
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO {role}', r.nspname);
    EXECUTE format('GRANT EXECUTE ON ALL ROUTINES IN SCHEMA %I TO {role}', r.nspname);
  END LOOP;
END $$;
ALTER DEFAULT PRIVILEGES FOR ROLE {su} GRANT USAGE, CREATE ON SCHEMAS TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {su} GRANT {dml} ON TABLES TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {su} GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role};
-- only the DDL trigger (as the superuser) writes messages into the slot
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, bytea) FROM PUBLIC;
CREATE SCHEMA IF NOT EXISTS svc_audit AUTHORIZATION {su};
REVOKE ALL ON SCHEMA svc_audit FROM PUBLIC;
CREATE OR REPLACE FUNCTION svc_audit.refuse_unlogged() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE r record;
BEGIN
  FOR r IN SELECT d.object_identity FROM pg_event_trigger_ddl_commands() d JOIN pg_class c ON c.oid = d.objid
            WHERE d.classid = 'pg_class'::regclass AND c.relpersistence = 'u' LOOP
    RAISE EXCEPTION 'unlogged tables and sequences are refused in this sandbox (%): the db audit cannot see their writes', r.object_identity;
  END LOOP;
END $fn$;
REVOKE ALL ON FUNCTION svc_audit.refuse_unlogged() FROM PUBLIC;
DROP EVENT TRIGGER IF EXISTS svc_audit_refuse_unlogged;
CREATE EVENT TRIGGER svc_audit_refuse_unlogged ON ddl_command_end EXECUTE FUNCTION svc_audit.refuse_unlogged();
CREATE OR REPLACE FUNCTION svc_audit.record_ddl() RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog AS $fn$
DECLARE r record;
BEGIN
  IF session_user <> {_literal(AGENT_ROLE)} THEN RETURN; END IF;
  FOR r IN SELECT d.command_tag, d.schema_name, d.object_identity FROM pg_event_trigger_ddl_commands() d LOOP
    PERFORM pg_logical_emit_message(true, {_literal(DDL_PREFIX)},
      json_build_object('tag', r.command_tag, 'schema', r.schema_name, 'object', r.object_identity)::text);
  END LOOP;
END $fn$;
REVOKE ALL ON FUNCTION svc_audit.record_ddl() FROM PUBLIC;
DROP EVENT TRIGGER IF EXISTS svc_audit_record_ddl;
CREATE EVENT TRIGGER svc_audit_record_ddl ON ddl_command_end EXECUTE FUNCTION svc_audit.record_ddl();
CREATE OR REPLACE FUNCTION svc_audit.record_drop() RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog AS $fn$
DECLARE r record;
BEGIN
  IF session_user <> {_literal(AGENT_ROLE)} THEN RETURN; END IF;
  FOR r IN SELECT d.schema_name, d.object_identity, d.object_type FROM pg_event_trigger_dropped_objects() d
            WHERE d.original LOOP
    PERFORM pg_logical_emit_message(true, {_literal(DDL_PREFIX)},
      json_build_object('tag', 'DROP ' || upper(r.object_type), 'schema', r.schema_name, 'object', r.object_identity)::text);
  END LOOP;
END $fn$;
REVOKE ALL ON FUNCTION svc_audit.record_drop() FROM PUBLIC;
DROP EVENT TRIGGER IF EXISTS svc_audit_record_drop;
CREATE EVENT TRIGGER svc_audit_record_drop ON sql_drop EXECUTE FUNCTION svc_audit.record_drop();
"""


# A fresh slot: nothing from before it (fixtures, a pooled sandbox's past) is decoded.
SLOT_SQL = (f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = {_literal(SLOT)};\n"
            f"SELECT 1 FROM pg_create_logical_replication_slot({_literal(SLOT)}, 'test_decoding');\n")

# One JSON row per committed transaction, table and operation, in commit order; grouped inside
# the server so row values never leave it. Nothing in it may fail on what the agent named its
# tables: the slot's changes are consumed even when the query then errors. `rel` is test_decoding's
# text (`public.items`, `s."My T"`, or for a TRUNCATE of several tables `public.a, public.b`): a
# name is matched as a run of unquoted characters or a quoted identifier, so `"logs: INSERT: x"`
# is one name, not the table `logs`. The DDL event trigger's messages come out as `ddl` rows.
KEY_SAMPLE = 20  # changed rows per transaction, table and operation whose primary-key values are read
KEY_CHARS = 128  # each key value cut to this many characters
# One column of test_decoding's tuple text: `name[type]:value`, the name and type quoted where needed,
# the value quoted ('it''s') or bare (42, null, true, unchanged-toast-datum). Matched from the start
# of the tuple, token after token, so a quoted value is consumed whole: text inside it that looks like
# a column is never read as one.
COLUMN_RE = r"""((?:[^" \[]|"(?:[^"]|"")*")+)\[((?:[^\]"]|"(?:[^"]|"")*"|\[\])*)\]:('(?:[^']|'')*'|[^ ]*)"""
# The primary-key values of the first KEY_SAMPLE changes per transaction, table and operation (the
# first occurrence of each key column: the old key of an UPDATE that changed it, else the row's key),
# with the key columns as test_decoding names them (quote_ident). Tables are matched by the name
# test_decoding prints (quote_ident(schema).quote_ident(table)) against the catalog as it is now: a
# table dropped since, or one without a primary key, has no keys.
DECODE_SQL = rf"""
WITH c AS MATERIALIZED (SELECT lsn, xid, data FROM pg_logical_slot_get_changes({_literal(SLOT)}, NULL, {CHUNK_CHANGES},
                                                                   'include-timestamp', '1')),
     ch AS MATERIALIZED (SELECT c.xid, c.lsn, c.data, m[1] AS rel, m[2] AS op
             FROM c, regexp_match(c.data, '^table ((?:[^":]|"(?:[^"]|"")*")+): (INSERT|UPDATE|DELETE|TRUNCATE):') AS m
            WHERE m IS NOT NULL),
     w AS (SELECT xid, rel, op, count(*) AS n, min(lsn) AS first FROM ch GROUP BY 1, 2, 3),
     pk AS (SELECT quote_ident(ns.nspname) || '.' || quote_ident(r.relname) AS rel,
                   array_agg(quote_ident(a.attname)::text ORDER BY array_position(i.indkey::int2[], a.attnum)) AS cols
              FROM pg_index i JOIN pg_class r ON r.oid = i.indrelid JOIN pg_namespace ns ON ns.oid = r.relnamespace
              JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = ANY (i.indkey::int2[])
             WHERE i.indisprimary AND quote_ident(ns.nspname) || '.' || quote_ident(r.relname) IN (SELECT rel FROM w)
             GROUP BY 1),
     s AS (SELECT ch.xid::text AS x, ch.rel, ch.op, ch.lsn, substr(ch.data, length('table ' || ch.rel || ': ' || ch.op || ': ') + 1) AS tuple,
                  row_number() OVER (PARTITION BY ch.xid::text, ch.rel, ch.op ORDER BY ch.lsn) AS i
             FROM ch WHERE ch.op <> 'TRUNCATE' AND ch.rel IN (SELECT rel FROM pk)),
     kv AS (SELECT s.x, s.rel, s.op, s.lsn,
                   (SELECT CASE WHEN count(t.v) = cardinality(pk.cols) THEN jsonb_agg(t.v ORDER BY col.o) END
                      FROM unnest(pk.cols) WITH ORDINALITY AS col(name, o)
                      LEFT JOIN LATERAL (
                        SELECT left(CASE WHEN x.m[3] LIKE '''%' THEN replace(substr(x.m[3], 2, length(x.m[3]) - 2), '''''', '''')
                                         ELSE x.m[3] END, {KEY_CHARS}) AS v
                          FROM regexp_matches(s.tuple, $re${COLUMN_RE}$re$, 'g') WITH ORDINALITY AS x(m, p)
                         WHERE x.m[1] = col.name ORDER BY x.p LIMIT 1) AS t ON true) AS key
              FROM s JOIN pk USING (rel) WHERE s.i <= {KEY_SAMPLE}),
     kg AS (SELECT x, rel, op, jsonb_agg(key ORDER BY first) AS keys
              FROM (SELECT x, rel, op, key, min(lsn) AS first FROM kv WHERE key IS NOT NULL GROUP BY 1, 2, 3, 4) AS d
             GROUP BY 1, 2, 3),
     d AS (SELECT xid, substring(data FROM ' content:(.*)$') AS body, lsn AS first
             FROM c WHERE data LIKE 'message: transactional: 1 prefix: {DDL_PREFIX}, sz: %'),
     t AS (SELECT xid, substring(data FROM '\(at (.*)\)$')::timestamptz AS ts, lsn FROM c WHERE data LIKE 'COMMIT %')
SELECT j FROM (
  SELECT json_build_object('rel', w.rel, 'op', w.op, 'rows', w.n, 'key_columns', pk.cols, 'keys', kg.keys,
                           'ts', to_char(t.ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) AS j, t.lsn, w.first
    FROM w JOIN t USING (xid) LEFT JOIN pk USING (rel) LEFT JOIN kg ON kg.x = w.xid::text AND kg.rel = w.rel AND kg.op = w.op
  UNION ALL
  SELECT json_build_object('ddl', d.body,
                           'ts', to_char(t.ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')), t.lsn, d.first
    FROM d JOIN t USING (xid)
  UNION ALL  -- last: how many rows the plugin produced, so the reader knows whether to read again
  SELECT json_build_object('changes', (SELECT count(*) FROM c)), NULL, NULL
) AS o ORDER BY o.lsn NULLS LAST, o.first
"""

OPERATIONS = {"INSERT": "insert", "UPDATE": "update", "DELETE": "delete", "TRUNCATE": "delete"}


def relations(text: str) -> list[tuple[str, str]]:
    """test_decoding's relation list -> [(schema, table)]: names separated by `, `, each
    `schema.table`, double-quoted where needed (`""` inside quotes is one `"`). Never raises."""
    names: list[list[str]] = [[""]]
    quoted, i = False, 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == '"' and text[i + 1:i + 2] == '"':
                names[-1][-1] += '"'
                i += 1
            elif ch == '"':
                quoted = False
            else:
                names[-1][-1] += ch
        elif ch == '"':
            quoted = True
        elif ch == ".":
            names[-1].append("")
        elif ch == "," and text[i + 1:i + 2] == " ":
            names.append([""])
            i += 1
        else:
            names[-1][-1] += ch
        i += 1
    return [(parts[0], ".".join(parts[1:])) if len(parts) > 1 else ("public", parts[0]) for parts in names]


def ddl_details(service: str, body: str) -> dict[str, Any]:
    """The DDL trigger's message -> `db_write` details: operation `ddl`, the command tag
    (`CREATE TABLE`, `ALTER TABLE`, `DROP TABLE`, ...) and the object it named."""
    ddl = json.loads(body)
    schema = str(ddl.get("schema") or "public")
    obj = str(ddl.get("object") or "")
    table = relations(obj)[0][1] if obj else ""
    return {"service": service, "schema": schema, "table": table if schema == "public" else f"{schema}.{table}",
            "operation": "ddl", "row_count": None, "command": str(ddl.get("tag") or ""), "object": obj,
            "committed": True}


def event_details(service: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """A decoded row -> `db_write` details, one per table (TRUNCATE: a delete of an unknown number
    of rows in each of its tables)."""
    if "ddl" in row:
        return [ddl_details(service, str(row["ddl"]))]
    op = row["op"]
    keyed = key_details(row) if op != "TRUNCATE" else {}
    return [{"service": service, "schema": schema, "table": table if schema == "public" else f"{schema}.{table}",
             "operation": OPERATIONS[op], "row_count": None if op == "TRUNCATE" else int(row["rows"]),
             "command": op, "committed": True, **keyed}
            for schema, table in relations(str(row["rel"]))]


def render_key(values: list[Any]) -> str:
    """One row's key values -> `3` (one column) or `(3, a)` (several)."""
    shown = [str(v) for v in values]
    return shown[0] if len(shown) == 1 else "(" + ", ".join(shown) + ")"


def key_details(row: dict[str, Any]) -> dict[str, Any]:
    """`key_columns`, `keys` (each rendered by `render_key`, at most KEY_SAMPLE) and `keys_more` of a
    decoded row of a table with a primary key; {} for a table without one."""
    columns = row.get("key_columns")
    if not isinstance(columns, list) or not columns:
        return {}
    keys = [render_key(k) for k in row.get("keys") or [] if isinstance(k, list) and k][:KEY_SAMPLE]
    return {"key_columns": [str(c) for c in columns], "keys": keys,
            "keys_more": int(row.get("rows") or 0) > KEY_SAMPLE}


def _psql_argv(user: str, database: str) -> list[str]:
    return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", user, "-d", database]


async def prepare(driver: SandboxDriver, container: str, service: str, superuser: str, database: str, password: str) -> None:
    """The agent's role, the hand-over, the UNLOGGED guard and a fresh slot; BootFailure naming the
    service when the server refuses."""
    if superuser == AGENT_ROLE:
        raise BootFailure("services", f"service '{service}': POSTGRES_USER '{AGENT_ROLE}' is the name of the agent's "
                                      "own role under audit.db_writes; choose another superuser name")
    # One psql for both (each exec is a round trip through the engine on the boot's critical path);
    # two -c, so two transactions: a slot cannot be made in a transaction that has written.
    raw = await driver.exec(container, [*_psql_argv(superuser, database), "-c", setup_sql(superuser, database, password),
                                        "-c", SLOT_SQL], env=SUPERUSER_ENV, watchdog_s=120)
    if raw.exit_code != 0:
        err = (raw.stderr or raw.stdout).decode("utf-8", "replace").strip()[-1500:]
        raise BootFailure("services", f"service '{service}': cannot start the db audit: {err}")


class DbAuditReader:
    """Drains one postgres service's slot into the sandbox's audit log."""

    def __init__(self, driver: SandboxDriver, container: str, service: str, superuser: str, database: str,
                 record: Callable[[str, dict[str, Any], str | None], object]):
        self.driver, self.container, self.service = driver, container, service
        self.superuser, self.database, self.record = superuser, database, record
        self.lock = asyncio.Lock()  # one reader of the slot at a time, events in commit order
        self.task: asyncio.Task[None] | None = None
        self.count = 0
        self.agent_locked = False  # end_agent_sessions ran: the agent's role cannot log in

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the container is going away, or the engine is busy: next round
                log.debug("db audit read of %s failed: %s", self.service, exc)

    async def poll(self) -> int:
        """Drain the slot: read chunks until one comes back short. Returns the events recorded."""
        async with self.lock:
            n = 0
            while True:
                recorded, changes = await self._read_chunk()
                n += recorded
                if changes is None or changes < CHUNK_CHANGES:
                    break
            self.count += n
            return n

    async def _read_chunk(self) -> tuple[int, int | None]:
        """One read of at most CHUNK_CHANGES decoded rows -> (events recorded, rows the plugin
        produced; None when the read failed)."""
        raw = await self._superuser_sql(DECODE_SQL, watchdog_s=120, output_cap=DECODE_OUTPUT_CAP)
        if raw.exit_code != 0:
            log.warning("db audit of service '%s': reading the slot failed: %s", self.service,
                        raw.stderr.decode("utf-8", "replace").strip()[-300:])
            return 0, None
        if raw.stdout_dropped:
            self.record("warning", {
                "kind": "db_audit_output_cut", "service": self.service, "dropped_bytes": raw.stdout_dropped,
                "message": f"the db audit of service '{self.service}' read more than {DECODE_OUTPUT_CAP} bytes at once; "
                           "the db_write events past that point are missing"}, None)
        n, changes = 0, None
        for line in raw.stdout.decode("utf-8", "replace").splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if "changes" in row:
                    changes = int(row["changes"])
                    continue
                for details in event_details(self.service, row):
                    self.record("db_write", details, row["ts"])
                    n += 1
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("db audit of service '%s': bad decoded row: %s", self.service, exc)
        return n, changes

    async def end_agent_sessions(self) -> None:
        """End every session of the agent's role and refuse its logins: a query the agent sent
        before it ended (`SELECT pg_sleep(5); INSERT ...`) goes on in its backend after the client
        is gone, and would commit after the last drain. `allow_agent_sessions` undoes it."""
        sql = (f"ALTER ROLE {_ident(AGENT_ROLE)} NOLOGIN;\n"
               f"SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity WHERE usename = {_literal(AGENT_ROLE)};")
        raw = await self._superuser_sql(sql, watchdog_s=30)
        if raw.exit_code != 0:
            raise RuntimeError(f"service '{self.service}': cannot end the agent's sessions: "
                               + raw.stderr.decode("utf-8", "replace").strip()[-300:])
        self.agent_locked = True

    async def allow_agent_sessions(self) -> None:
        if not self.agent_locked:
            return
        raw = await self._superuser_sql(f"ALTER ROLE {_ident(AGENT_ROLE)} LOGIN", watchdog_s=30)
        if raw.exit_code == 0:
            self.agent_locked = False

    async def _superuser_sql(self, sql: str, *, watchdog_s: float, output_cap: int = OUTPUT_CAP_BYTES) -> RawExec:
        """`sql` through psql as the superuser (unaligned, tuples only; search_path pinned to
        pg_catalog so nothing the agent created runs with its rights)."""
        return await self.driver.exec(self.container, [*_psql_argv(self.superuser, self.database), "-At", "-c", sql],
                                      env=SUPERUSER_ENV, watchdog_s=watchdog_s, output_cap=output_cap)

    async def stop(self) -> None:
        """Stop polling, then read what is left."""
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except BaseException:
                pass
            self.task = None
        try:
            await self.poll()
        except Exception as exc:
            log.debug("last db audit read of %s failed: %s", self.service, exc)
