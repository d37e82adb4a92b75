"""The ``scenario_jobs`` table: the engine's persisted jobs of single runs, replica suites and
experiments.

state: pending (experiment not started) | queued | running | done | cancelled. ``group_kind`` is the
engine kind of the job's group (``run`` | ``suite`` | ``experiment``): groups are told apart by it,
not by the shape of their ids. A single run is a group of one job whose job id, group id and run id
are the run's id."""
from __future__ import annotations

from typing import Any, Iterable

from daemon.store.db import Store, dumps


async def insert_many(store: Store, rows: Iterable[tuple]) -> None:
    """Rows of (id, tenant_id, group_kind, group_id, scenario_id, matrix_index, replica_index, seed, run_id, state)."""
    await store.executemany(
        "INSERT INTO scenario_jobs (id, tenant_id, group_kind, group_id, scenario_id, matrix_index, replica_index, seed, run_id, state)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        list(rows),
    )


async def get(store: Store, job_id: str) -> Any:
    return await store.fetchone("SELECT * FROM scenario_jobs WHERE id = ?", (job_id,))


async def group_kind(store: Store, group_id: str) -> str | None:
    row = await store.fetchone("SELECT group_kind FROM scenario_jobs WHERE group_id = ? LIMIT 1", (group_id,))
    return row["group_kind"] if row is not None else None


async def of_group(store: Store, group_id: str, order: str = "seq") -> list[Any]:
    orders = {"seq": "seq", "replica": "replica_index", "done": "COALESCE(done_seq, 1e18), seq", "done_only": "done_seq"}
    where = " AND state = 'done'" if order == "done_only" else ""
    return await store.fetchall(f"SELECT * FROM scenario_jobs WHERE group_id = ?{where} ORDER BY {orders[order]}", (group_id,))


async def finished_of_group(store: Store, group_id: str) -> list[Any]:
    """The group's finished jobs in the order they finished (a stream rebuilt from the store)."""
    return await store.fetchall("SELECT * FROM scenario_jobs WHERE group_id = ? AND status IS NOT NULL ORDER BY done_seq", (group_id,))


async def finished_of_group_by_seq(store: Store, group_id: str) -> list[Any]:
    """The group's finished jobs (status set), in the order they were queued."""
    return await store.fetchall("SELECT * FROM scenario_jobs WHERE group_id = ? AND status IS NOT NULL ORDER BY seq", (group_id,))


async def tally_of_scenario(store: Store, scenario_id: str) -> list[Any]:
    """(state, status, n, score_sum, scored) per state and status of the scenario's jobs: what its row
    is decided from, without reading each job (a finished replica asks it)."""
    return await store.fetchall(
        "SELECT state, status, COUNT(*) AS n, SUM(score) AS score_sum, COUNT(score) AS scored FROM scenario_jobs"
        " WHERE scenario_id = ? GROUP BY state, status", (scenario_id,))


async def of_scenarios(store: Store, scenario_ids: list[str]) -> list[Any]:
    marks = ",".join("?" * len(scenario_ids))
    return await store.fetchall(f"SELECT * FROM scenario_jobs WHERE scenario_id IN ({marks}) ORDER BY replica_index", tuple(scenario_ids))


async def queued_ids(store: Store, group_id: str) -> list[str]:
    rows = await store.fetchall("SELECT id FROM scenario_jobs WHERE group_id = ? AND state = 'queued' ORDER BY seq", (group_id,))
    return [row["id"] for row in rows]


async def count(store: Store, group_id: str, states: tuple[str, ...]) -> int:
    marks = ",".join("?" * len(states))
    row = await store.fetchone(f"SELECT COUNT(*) AS n FROM scenario_jobs WHERE group_id = ? AND state IN ({marks})", (group_id, *states))
    return row["n"]


async def finished_count(store: Store, group_id: str) -> int:
    row = await store.fetchone("SELECT COUNT(*) AS n FROM scenario_jobs WHERE group_id = ? AND status IS NOT NULL", (group_id,))
    return row["n"]


async def running(store: Store, kind: str) -> list[Any]:
    return await store.fetchall("SELECT * FROM scenario_jobs WHERE state = 'running' AND group_kind = ? ORDER BY seq", (kind,))


async def queued_of_kind(store: Store, kind: str) -> list[Any]:
    return await store.fetchall("SELECT * FROM scenario_jobs WHERE state = 'queued' AND group_kind = ? ORDER BY seq", (kind,))


async def orphan_groups(store: Store) -> list[str]:
    """Groups with queued jobs whose experiment or suite is no longer running."""
    rows = await store.fetchall(
        "SELECT DISTINCT group_id FROM scenario_jobs WHERE state = 'queued' AND group_kind IN ('experiment', 'suite')"
        " AND group_id NOT IN"
        " (SELECT id FROM experiments WHERE status = 'running' UNION ALL SELECT id FROM replica_suites WHERE status = 'running')"
    )
    return [row["group_id"] for row in rows]


# A single run's job is copied from its queued run row (id, tenant, seed; queued when the run was).
_RUN_JOB = (
    "INSERT INTO scenario_jobs (id, tenant_id, group_kind, group_id, replica_index, seed, run_id, state, queued_at)"
    " SELECT id, tenant_id, 'run', id, 0, seed, id, 'queued', created_at FROM runs"
)


async def insert_run_job(store: Store, run_id: str) -> None:
    await store.execute(_RUN_JOB + " WHERE id = ?", (run_id,))


async def adopt_queued_runs(store: Store) -> int:
    """Queued single runs with no job row (written before single runs had one) get theirs."""
    return await store.execute(
        _RUN_JOB + " WHERE status = 'queued' AND experiment_id IS NULL AND id NOT IN (SELECT run_id FROM scenario_jobs) ORDER BY seq"
    )


async def retry(store: Store, job_id: str, run_id: str, previous_run_ids: list[str], now: str) -> None:
    """A job found running after a restart: queued again under a fresh run id (same seed)."""
    await store.execute(
        "UPDATE scenario_jobs SET state = 'queued', run_id = ?, previous_run_ids = ?, queued_at = ?, started_at = NULL"
        " WHERE id = ? AND state = 'running'",
        (run_id, dumps(previous_run_ids), now, job_id),
    )


async def queue_pending(store: Store, group_id: str, now: str) -> None:
    await store.execute(
        "UPDATE scenario_jobs SET state = 'queued', queued_at = ? WHERE group_id = ? AND state = 'pending'", (now, group_id)
    )


async def cancel(store: Store, group_id: str, now: str, states: tuple[str, ...], error: str | None = None) -> None:
    marks = ",".join("?" * len(states))
    if error is None:
        await store.execute(
            f"UPDATE scenario_jobs SET state = 'cancelled', finished_at = ? WHERE group_id = ? AND state IN ({marks})",
            (now, group_id, *states),
        )
    else:
        await store.execute(
            f"UPDATE scenario_jobs SET state = 'cancelled', finished_at = ?, error = ? WHERE group_id = ? AND state IN ({marks})",
            (now, error, group_id, *states),
        )


async def mark_running(store: Store, job_id: str, now: str, concurrency: int | None = None) -> None:
    """`concurrency`: the global limit it starts under (daemon/runner/concurrency.py)."""
    await store.execute(
        "UPDATE scenario_jobs SET state = 'running', attempts = attempts + 1, started_at = ?, concurrency = ?"
        " WHERE id = ? AND state = 'queued'",
        (now, concurrency, job_id),
    )


async def put_back(store: Store, job_id: str) -> None:
    """The job did not really run (shutdown, at capacity): queued again, attempt not counted."""
    await store.execute(
        "UPDATE scenario_jobs SET state = 'queued', attempts = MAX(0, attempts - 1), started_at = NULL WHERE id = ? AND state = 'running'",
        (job_id,),
    )


async def finish(store: Store, job_id: str, *, state: str, status: str | None, score: float | None, error: str | None,
                 result: dict | None, wall_ms: int | None, cost_usd: float | None, now: str) -> bool:
    """Write the job's outcome once (state moves to done/cancelled in the same statement)."""
    group = await store.fetchone("SELECT group_id FROM scenario_jobs WHERE id = ?", (job_id,))
    if group is None:
        return False
    changed = await store.execute(
        "UPDATE scenario_jobs SET state = ?, status = ?, score = ?, error = ?, result = ?, wall_ms = ?, cost_usd = ?,"
        " finished_at = ?, done_seq = (SELECT COALESCE(MAX(done_seq), 0) + 1 FROM scenario_jobs WHERE group_id = ?)"
        " WHERE id = ? AND state IN ('running', 'queued')",
        (state, status, score, error, dumps(result) if result is not None else None, wall_ms, cost_usd, now, group["group_id"], job_id),
    )
    return changed > 0
