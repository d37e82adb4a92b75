"""The ``trace_events`` table: every statement on trace rows.

Reads run on an aiosqlite Store (the API's reader connection, or the main store); the writer's
statements (daemon/traces/writer.py) run on its own sqlite3 connection in its thread. Shaping rows
into events, spans and traces is daemon/traces/query.py's.
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import aiosqlite

from daemon.store.db import Store

# The columns a read selects, in this order (daemon.traces.query reads rows by position).
EVENT_COLUMNS = (
    "seq, trace_id, span_id, parent_span_id, root_span_id, head, ts, event_type, phase, tool, status, error_type,"
    " duration_ms, cost_usd, cost, input, output, metadata, sandbox_id, run_id, experiment_id, scenario_id, agent,"
    " agent_version, source, received_at"
)
# Every column the writer stores, in this order.
COLUMNS = (
    "seq", "tenant_id", "trace_id", "span_id", "parent_span_id", "root_span_id", "head", "ts", "event_type",
    "phase", "tool", "status", "error_type", "duration_ms", "model", "input_tokens", "output_tokens",
    "cached_tokens", "cost_usd", "cost", "input", "output", "metadata", "sandbox_id", "run_id", "experiment_id",
    "scenario_id", "agent", "agent_version", "source", "received_at",
)
# Columns with their own index whose values are (nearly) unique to one tenant. When a query filters
# on one of them, the tenant condition is written `+tenant_id` so SQLite does not pick the
# low-selectivity (tenant_id, ...) indexes instead (the planner has no statistics to know better).
SELECTIVE = ("trace_id", "span_id", "parent_span_id", "root_span_id", "sandbox_id", "experiment_id", "run_id", "scenario_id")


def tenant_clause(where: str) -> str:
    """The tenant condition to put before `where` (' AND col = ? ...')."""
    if any(f" AND {column} = ?" in where for column in SELECTIVE):
        return "+tenant_id = ?"
    return "tenant_id = ?"


# -- reads ------------------------------------------------------------------------------------------

async def event_rows(db: Any, tenant_id: str, where: str, params: list[Any], *, order: str, limit: int,
                     after: int | None = None, head_only: bool = False) -> list[Any]:
    """Up to `limit` rows (EVENT_COLUMNS) of the tenant matching `where` (' AND ...'), by seq in
    `order` ('asc' or 'desc') starting after seq `after`; only each span's first row with head_only."""
    heads = " AND head = 1" if head_only else ""
    sql = f"SELECT {EVENT_COLUMNS} FROM trace_events WHERE {tenant_clause(where)}{heads}{where}"
    args = [tenant_id, *params]
    if after is not None:
        sql += " AND seq < ?" if order == "desc" else " AND seq > ?"
        args.append(after)
    sql += f" ORDER BY seq {order.upper()} LIMIT ?"
    return await db.fetchall(sql, [*args, limit])


async def iter_rows(db: Any, tenant_id: str, where: str, params: list[Any], *, order: str, after: int | None,
                    chunk: int, head_only: bool = False) -> list[Any]:
    """One chunk (at most `chunk` rows, EVENT_COLUMNS) of a walk over every matching row: as
    event_rows, with the head condition after `where` (the order the walk has always used)."""
    sql = f"SELECT {EVENT_COLUMNS} FROM trace_events WHERE {tenant_clause(where)}{where}" + (" AND head = 1" if head_only else "")
    args = [tenant_id, *params]
    if after is not None:
        sql += " AND seq < ?" if order == "desc" else " AND seq > ?"
        args.append(after)
    return await db.fetchall(sql + f" ORDER BY seq {order.upper()} LIMIT ?", [*args, chunk])


async def tail_rows(db: Any, tenant_id: str, span_ids: list[str]) -> list[Any]:
    """The rows (EVENT_COLUMNS) of these spans other than their first (head = 0), by seq; asked
    500 spans at a time."""
    found: list[Any] = []
    for start in range(0, len(span_ids), 500):
        part = span_ids[start:start + 500]
        found.extend(await db.fetchall(
            f"SELECT {EVENT_COLUMNS} FROM trace_events WHERE span_id IN ({','.join('?' * len(part))}) AND +tenant_id = ? AND head = 0"
            " ORDER BY seq",
            [*part, tenant_id],
        ))
    return found


async def trace_owner(db: Any, trace_id: str) -> str | None:
    """The tenant that has rows of this trace, or None."""
    row = await db.fetchone("SELECT tenant_id FROM trace_events WHERE trace_id = ? LIMIT 1", (trace_id,))
    return row["tenant_id"] if row else None


async def trace_rows(db: Any, tenant_id: str, trace_id: str) -> list[Any]:
    """Every row (EVENT_COLUMNS) of one of the tenant's traces, by seq."""
    return await db.fetchall(
        f"SELECT {EVENT_COLUMNS} FROM trace_events WHERE trace_id = ? AND +tenant_id = ? ORDER BY seq", (trace_id, tenant_id)
    )


async def sandbox_owner(db: Any, sandbox_id: str, tenant_id: str) -> str | None:
    """A tenant with trace rows of this sandbox (`tenant_id` first when it has some), or None."""
    row = await db.fetchone(
        "SELECT tenant_id FROM trace_events WHERE sandbox_id = ? ORDER BY tenant_id = ? DESC LIMIT 1",
        (sandbox_id, tenant_id),
    )
    return row["tenant_id"] if row else None


async def closed_call_rows(db: Any, tenant_id: str, where: str, params: list[Any], sample: int) -> list[Any]:
    """event_type, tool, status, duration_ms of the most recent `sample` closed llm_call/tool_call
    rows matching `where`, newest first."""
    return await db.fetchall(
        f"SELECT event_type, tool, status, duration_ms FROM trace_events WHERE {tenant_clause(where)}{where}"
        " AND phase IN ('end', 'complete') AND event_type IN ('llm_call', 'tool_call') ORDER BY seq DESC LIMIT ?",
        [tenant_id, *params, sample],
    )


async def cost_totals(db: Any, tenant_id: str, where: str, params: list[Any]) -> Any:
    """A row of usd, inp, outp and unpriced: cost and token sums over every row matching `where`, and
    how many finished llm_call events have no price (left out of usd)."""
    return await db.fetchone(
        f"SELECT COALESCE(SUM(cost_usd), 0) AS usd, COALESCE(SUM(input_tokens), 0) AS inp, COALESCE(SUM(output_tokens), 0) AS outp,"
        " COALESCE(SUM(event_type = 'llm_call' AND phase IN ('end', 'complete') AND cost_usd IS NULL), 0) AS unpriced"
        f" FROM trace_events WHERE {tenant_clause(where)}{where}",
        [tenant_id, *params],
    )


async def open_reader(db_path: Path | str) -> Store:
    """A read connection for trace queries (its own, so long reads do not hold up the main store)."""
    reader = await aiosqlite.connect(str(db_path), isolation_level=None)
    reader.row_factory = aiosqlite.Row
    await reader.execute("PRAGMA busy_timeout=5000")
    await reader.execute("PRAGMA cache_size=-32768")
    return Store(reader)


# -- the runner: a scenario's events ------------------------------------------------------------------

async def run_rows_after(db: Any, tenant_id: str, sandbox_id: str | None, run_id: str, after_seq: int, limit: int) -> list[Any]:
    """Up to `limit` full rows of a sandbox's or run's events with seq past `after_seq`, by seq."""
    return await db.fetchall(
        "SELECT * FROM trace_events WHERE tenant_id = ? AND (sandbox_id = ? OR run_id = ?) AND seq > ? ORDER BY seq LIMIT ?",
        (tenant_id, sandbox_id, run_id, after_seq, limit),
    )


async def max_seq(db: Any) -> int:
    """The highest seq stored (0 when there are none)."""
    row = await db.fetchone("SELECT COALESCE(MAX(seq), 0) AS seq FROM trace_events")
    return row["seq"]


# -- the writer (sqlite3, its own thread) --------------------------------------------------------------

_ROW_PLACEHOLDERS = "(" + ", ".join("?" for _ in COLUMNS) + ")"
# Rows go in as multi-row INSERTs (one sqlite3_step, the GIL released once) rather than executemany,
# whose per-row GIL hand-offs crawl while the event loop thread is busy parsing the next requests.
CHUNK_ROWS = 512  # 512 x 31 columns stays under SQLite's default 32,766 bound parameters


def _insert_sql(rows: int) -> str:
    return f"INSERT INTO trace_events ({', '.join(COLUMNS)}) VALUES " + ", ".join([_ROW_PLACEHOLDERS] * rows)


def insert_rows(conn: sqlite3.Connection, values: list[tuple[Any, ...]]) -> None:
    """Insert `values` (tuples in COLUMNS order) in chunks of 512, 256, ..., 1 rows, so only a few
    distinct statements get prepared."""
    start = 0
    size = CHUNK_ROWS
    while start < len(values):
        while size > len(values) - start:
            size //= 2
        chunk = values[start:start + size]
        conn.execute(_insert_sql(size), [v for row in chunk for v in row])
        start += size


def open_writer(db_path: str) -> sqlite3.Connection:
    """The writer's connection: WAL, a 64 MiB cache, a checkpoint every ~32 MiB of WAL."""
    conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: index pages of random span ids stay hot
    conn.execute("PRAGMA wal_autocheckpoint=8192")  # checkpoint every ~32 MiB of WAL, not every 4
    return conn


def max_seq_sync(conn: sqlite3.Connection) -> int:
    """The highest seq stored (0 when there are none)."""
    return conn.execute("SELECT COALESCE(MAX(seq), 0) FROM trace_events").fetchone()[0]


def has_statistics(conn: sqlite3.Connection) -> bool:
    """Whether ANALYZE has left statistics for trace_events."""
    return bool(conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone() and conn.execute(
        "SELECT 1 FROM sqlite_stat1 WHERE tbl = 'trace_events' LIMIT 1").fetchone())


def analyze(conn: sqlite3.Connection) -> None:
    """Sampled statistics for trace_events (raises sqlite3.Error when it fails)."""
    conn.execute("PRAGMA analysis_limit=1000")
    conn.execute("ANALYZE trace_events")


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: BEGIN IMMEDIATE, COMMIT at the end, ROLLBACK (and re-raise) on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def fill_root(conn: sqlite3.Connection, tenant_id: str, trace_id: str, root: str) -> None:
    """Set root_span_id on the trace's rows that have none yet."""
    conn.execute(
        "UPDATE trace_events SET root_span_id = ? WHERE trace_id = ? AND +tenant_id = ? AND root_span_id IS NULL",
        (root, trace_id, tenant_id),
    )


def span_trace(conn: sqlite3.Connection, tenant_id: str, span_id: str) -> tuple[str, str | None] | None:
    """(trace_id, root_span_id) of a stored span (a row with a root preferred), or None."""
    row = conn.execute(
        "SELECT trace_id, root_span_id FROM trace_events WHERE span_id = ? AND +tenant_id = ?"
        " ORDER BY root_span_id IS NULL LIMIT 1",
        (span_id, tenant_id),
    ).fetchone()
    return None if row is None else (row[0], row[1])


def trace_root(conn: sqlite3.Connection, tenant_id: str, trace_id: str) -> str | None:
    """A root_span_id stored for the trace (a root span's own row preferred), or None."""
    row = conn.execute(
        "SELECT root_span_id FROM trace_events WHERE trace_id = ? AND +tenant_id = ? AND root_span_id IS NOT NULL"
        " ORDER BY parent_span_id IS NOT NULL LIMIT 1",
        (trace_id, tenant_id),
    ).fetchone()
    return row[0] if row else None


async def stamp_run(store: Any, sandbox_id: str, after_seq: int, run_id: str, experiment_id: str | None,
                    scenario_id: str | None, agent: str | None) -> int:
    """Stamp a sandbox's events past `after_seq` that have no run with the run (and, where they
    have none, its experiment, scenario and agent); the number of rows changed."""
    return await store.execute(
        "UPDATE trace_events SET run_id = ?, experiment_id = COALESCE(experiment_id, ?),"
        " scenario_id = COALESCE(scenario_id, ?), agent = COALESCE(agent, ?)"
        " WHERE sandbox_id = ? AND seq > ? AND run_id IS NULL",
        (run_id, experiment_id, scenario_id, agent, sandbox_id, after_seq),
    )


# -- experiments: the events of a job group's runs ---------------------------------------------------

_RUNS_OF = "SELECT run_id FROM scenario_jobs WHERE group_id = ?"


async def cost_by_run(store: Any, tenant_id: str, group_id: str) -> list[Any]:
    """Rows of run_id, cost: the summed cost_usd of each run of the job group that has any."""
    return await store.fetchall(
        f"SELECT run_id, SUM(cost_usd) AS cost FROM trace_events WHERE tenant_id = ? AND run_id IN ({_RUNS_OF})"
        " AND cost_usd IS NOT NULL GROUP BY run_id",
        [tenant_id, group_id],
    )


async def cost_outside_runs(store: Any, tenant_id: str, experiment_id: str) -> float:
    """The summed cost_usd of the events stamped with the experiment but with none of its job
    group's runs (an agent's own OTLP export that names only the experiment)."""
    row = await store.fetchone(
        "SELECT COALESCE(SUM(cost_usd), 0) AS cost FROM trace_events WHERE tenant_id = ? AND experiment_id = ?"
        f" AND cost_usd IS NOT NULL AND (run_id IS NULL OR run_id NOT IN ({_RUNS_OF}))",
        [tenant_id, experiment_id, experiment_id],
    )
    return float(row["cost"]) if row is not None else 0.0


async def trace_ids_of_runs(store: Any, tenant_id: str, group_id: str) -> list[Any]:
    """Rows of run_id, trace_id: each trace of each run of the job group, in order of first arrival."""
    return await store.fetchall(
        f"SELECT run_id, trace_id FROM trace_events WHERE tenant_id = ? AND run_id IN ({_RUNS_OF})"
        " GROUP BY run_id, trace_id ORDER BY MIN(seq)",
        [tenant_id, group_id],
    )


async def tool_call_rows(store: Any, tenant_id: str, experiment_id: str) -> list[Any]:
    """Rows of tool, status, duration_ms: every tool_call row past its start of the experiment's
    runs (and of its events not stamped with a run)."""
    return await store.fetchall(
        "SELECT tool, status, duration_ms FROM trace_events WHERE tenant_id = ? AND event_type = 'tool_call' AND phase != 'start'"
        f" AND (run_id IN ({_RUNS_OF}) OR (run_id IS NULL AND experiment_id = ?))",
        [tenant_id, experiment_id, experiment_id],
    )


async def experiment_rows_after(store: Any, tenant_id: str, group_id: str, experiment_id: str, after_seq: int,
                                limit: int = 1000) -> list[Any]:
    """Up to `limit` full rows, by seq past `after_seq`, of the events of an experiment: its job
    group's runs' and those stamped with the experiment."""
    return await store.fetchall(
        "SELECT * FROM trace_events WHERE tenant_id = ? AND seq > ? AND (run_id IN (SELECT run_id FROM scenario_jobs WHERE group_id = ?)"
        f" OR experiment_id = ?) ORDER BY seq LIMIT {int(limit)}",
        [tenant_id, after_seq, group_id, experiment_id],
    )
