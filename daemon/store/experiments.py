"""Experiments, their scenarios, and replica suites (``006_experiments.sql``): the groups the job
engine runs as the ``experiment`` and ``suite`` kinds. Their jobs are in :mod:`daemon.store.jobs`."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store, dumps, loads
from daemon.store.pagination import RowPage, newest_first

# --- experiments -----------------------------------------------------------------------------------


async def get(store: Store, experiment_id: str) -> Any:
    return await store.fetchone("SELECT * FROM experiments WHERE id = ?", (experiment_id,))


async def known_ids(store: Store, tenant_id: str, ids: list[str]) -> set[str]:
    """Those of `ids` that are the tenant's experiments or replica suites (the ids a run, and so a
    trace event, is filed under)."""
    found: set[str] = set()
    for start in range(0, len(ids), 400):  # within SQLite's bound on query parameters
        chunk = ids[start:start + 400]
        marks = ", ".join("?" for _ in chunk)
        rows = await store.fetchall(
            f"SELECT id FROM experiments WHERE tenant_id = ? AND id IN ({marks})"
            f" UNION SELECT id FROM replica_suites WHERE tenant_id = ? AND id IN ({marks})",
            (tenant_id, *chunk, tenant_id, *chunk))
        found.update(row["id"] for row in rows)
    return found


async def page_ids(store: Store, tenant_id: str, limit: int, after: int | None, *, spec_id: str | None = None,
                   status: str | None = None) -> RowPage:
    """A page (newest first) of rows of id, seq: the tenant's experiments, of one spec and in one
    status when given."""
    sql = "SELECT e.id, e.seq FROM experiments e WHERE e.tenant_id = ?"
    params: list[Any] = [tenant_id]
    if spec_id:
        sql += " AND e.spec_id = ?"
        params.append(spec_id)
    if status:
        sql += " AND e.status = ?"
        params.append(status)
    return await newest_first(store, sql, params, limit, after)


async def page_of_spec(store: Store, tenant_id: str, spec_id: str, limit: int, after: int | None, *,
                       status: str | None = None) -> RowPage:
    """A page (newest first) of the tenant's experiment rows of one spec, in one status when given."""
    sql = "SELECT * FROM experiments WHERE tenant_id = ? AND spec_id = ?"
    params: list[Any] = [tenant_id, spec_id]
    if status:
        sql += " AND status = ?"
        params.append(status)
    return await newest_first(store, sql, params, limit, after)


async def with_progress(store: Store, experiment_ids: list[str]) -> list[Any]:
    """Experiment rows with ``completed_runs`` (their finished jobs), in the order of the ids given."""
    if not experiment_ids:
        return []
    marks = ",".join("?" * len(experiment_ids))
    rows = await store.fetchall(
        "SELECT e.*, (SELECT COUNT(*) FROM scenario_jobs j WHERE j.group_id = e.id AND j.status IS NOT NULL) AS completed_runs"
        f" FROM experiments e WHERE e.id IN ({marks})", tuple(experiment_ids))
    by_id = {row["id"]: row for row in rows}
    return [by_id[i] for i in experiment_ids if i in by_id]


async def set_models(store: Store, experiment_id: str, replay_models_from: str | None, models_budget: dict[str, Any] | None) -> None:
    await store.execute("UPDATE experiments SET replay_models_from = ?, models_budget = ? WHERE id = ?",
                        (replay_models_from, dumps(models_budget) if models_budget else None, experiment_id))


async def models_of(store: Store, experiment_id: str) -> Any:
    """A row of replay_models_from, models_budget and base_seed, or None."""
    return await store.fetchone("SELECT replay_models_from, models_budget, base_seed FROM experiments WHERE id = ?",
                                (experiment_id,))


async def model_recording(store: Store, experiment_id: str, matrix_index: int, replica_index: int) -> str | None:
    """The model recording of one replica's run in an experiment (what its reproducer pins)."""
    row = await store.fetchone(
        "SELECT r.pins FROM scenario_jobs j JOIN runs r ON r.id = j.run_id"
        " WHERE j.group_id = ? AND j.matrix_index = ? AND j.replica_index = ?", (experiment_id, matrix_index, replica_index))
    pins = loads(row["pins"], None) if row is not None and row["pins"] else None
    return (pins or {}).get("model_recording")


async def insert(store: Store, *, experiment_id: str, tenant_id: str, name: str, spec_record: dict[str, Any], replicas: int,
                 concurrency: int | None, matrix: list[dict[str, Any]], inputs: dict[str, Any] | None, base_seed: str,
                 filter_failing_from: str | None, secret_names: list[str], total_runs: int, now: str) -> None:
    await store.execute(
        "INSERT INTO experiments (id, tenant_id, name, spec_id, spec_version, status, replicas, concurrency, matrix, inputs,"
        " base_seed, filter_failing_from, secret_names, total_runs, created_at) VALUES (?, ?, ?, ?, ?, 'created', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (experiment_id, tenant_id, name, spec_record["id"], spec_record["version"], replicas, concurrency, dumps(matrix),
         dumps(inputs) if inputs is not None else None, base_seed, filter_failing_from, dumps(secret_names), total_runs, now),
    )


async def start(store: Store, experiment_id: str, now: str) -> int:
    return await store.execute("UPDATE experiments SET status = 'running', started_at = ? WHERE id = ? AND status = 'created'",
                               (now, experiment_id))


async def set_secret_names(store: Store, experiment_id: str, names: list[str]) -> None:
    await store.execute("UPDATE experiments SET secret_names = ? WHERE id = ?", (dumps(names), experiment_id))


async def cancel(store: Store, experiment_id: str, now: str) -> int:
    return await store.execute(
        "UPDATE experiments SET status = 'cancelled', finished_at = ?, error = 'cancelled by request' WHERE id = ? AND status IN ('created', 'running')",
        (now, experiment_id),
    )


async def fail(store: Store, experiment_id: str, message: str, now: str) -> None:
    await store.execute(
        "UPDATE experiments SET status = 'failed', error = ?, finished_at = ? WHERE id = ? AND status IN ('created', 'running')",
        (message, now, experiment_id),
    )


async def complete(store: Store, experiment_id: str, now: str) -> None:
    await store.execute("UPDATE experiments SET status = 'completed', finished_at = ? WHERE id = ? AND status = 'running'",
                        (now, experiment_id))


async def set_summary(store: Store, experiment_id: str, summary: dict[str, Any]) -> None:
    await store.execute("UPDATE experiments SET summary = ? WHERE id = ?", (dumps(summary), experiment_id))


async def running_groups(store: Store) -> list[Any]:
    """Running experiments and suites, oldest first: rows of (id, kind, seq)."""
    return await store.fetchall(
        "SELECT id, 'experiment' AS kind, seq FROM experiments WHERE status = 'running'"
        " UNION ALL SELECT id, 'suite' AS kind, seq FROM replica_suites WHERE status = 'running' ORDER BY seq"
    )


# --- scenarios -------------------------------------------------------------------------------------


async def insert_scenarios(store: Store, rows: list[tuple]) -> None:
    """Rows of (id, experiment_id, tenant_id, matrix_index, matrix_entry_json, replicas, status)."""
    await store.executemany(
        "INSERT INTO scenarios (id, experiment_id, tenant_id, matrix_index, matrix_entry, replicas, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


async def scenarios(store: Store, experiment_id: str) -> list[Any]:
    return await store.fetchall("SELECT * FROM scenarios WHERE experiment_id = ? ORDER BY matrix_index", (experiment_id,))


async def page_scenarios(store: Store, experiment_id: str, limit: int, after: int | None, *,
                         statuses: tuple[str, ...] | list[str] | None = None, scenario_id: str | None = None) -> RowPage:
    """A page (newest first) of an experiment's scenario rows, those in `statuses` and the one
    `scenario_id` when given."""
    sql = "SELECT * FROM scenarios WHERE experiment_id = ?"
    params: list[Any] = [experiment_id]
    if statuses:
        sql += f" AND status IN ({','.join('?' * len(statuses))})"
        params += list(statuses)
    if scenario_id:
        sql += " AND id = ?"
        params.append(scenario_id)
    return await newest_first(store, sql, params, limit, after)


async def scenario_ids(store: Store, experiment_id: str) -> list[str]:
    rows = await store.fetchall("SELECT id FROM scenarios WHERE experiment_id = ?", (experiment_id,))
    return [row["id"] for row in rows]


async def scenario_with_experiment(store: Store, scenario_id: str) -> Any:
    return await store.fetchone(
        "SELECT s.*, e.status AS experiment_status, e.id AS eid FROM scenarios s JOIN experiments e ON e.id = s.experiment_id WHERE s.id = ?",
        (scenario_id,),
    )


async def scenario_matrix_entry(store: Store, scenario_id: str) -> str | None:
    row = await store.fetchone("SELECT matrix_entry FROM scenarios WHERE id = ?", (scenario_id,))
    return row["matrix_entry"] if row is not None else None


async def failing_matrix_entries(store: Store, experiment_id: str) -> list[str]:
    rows = await store.fetchall(
        "SELECT matrix_entry FROM scenarios WHERE experiment_id = ? AND verdict IN ('fail', 'flaky', 'error') ORDER BY matrix_index",
        (experiment_id,),
    )
    return [row["matrix_entry"] for row in rows]


async def set_scenarios_status(store: Store, experiment_id: str, status: str) -> None:
    await store.execute("UPDATE scenarios SET status = ? WHERE experiment_id = ?", (status, experiment_id))


async def scenario_started(store: Store, scenario_id: str) -> None:
    await store.execute("UPDATE scenarios SET status = 'running' WHERE id = ? AND status = 'queued'", (scenario_id,))


async def update_scenario(store: Store, scenario_id: str, *, status: str, verdict: str | None, passed: int | None,
                          score: float | None, finished_at: str | None) -> None:
    await store.execute("UPDATE scenarios SET status = ?, verdict = ?, passed = ?, score = ?, finished_at = ? WHERE id = ?",
                        (status, verdict, passed, score, finished_at, scenario_id))


# --- replica suites --------------------------------------------------------------------------------


async def get_suite(store: Store, suite_id: str) -> Any:
    return await store.fetchone("SELECT * FROM replica_suites WHERE id = ?", (suite_id,))


async def insert_suite(store: Store, *, suite_id: str, tenant_id: str, spec_record: dict[str, Any], n_replicas: int,
                       inputs: dict[str, Any] | None, base_seed: str, secret_names: list[str], now: str) -> None:
    await store.execute(
        "INSERT INTO replica_suites (id, tenant_id, spec_id, spec_version, n_replicas, inputs, base_seed, secret_names, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
        (suite_id, tenant_id, spec_record["id"], spec_record["version"], n_replicas, dumps(inputs) if inputs is not None else None,
         base_seed, dumps(secret_names), now),
    )


async def fail_suite(store: Store, suite_id: str, message: str, now: str) -> None:
    await store.execute(
        "UPDATE replica_suites SET status = 'errored', error = ?, finished_at = ? WHERE id = ? AND status IN ('created', 'running')",
        (message, now, suite_id),
    )


async def complete_suite(store: Store, suite_id: str, now: str) -> None:
    await store.execute("UPDATE replica_suites SET status = 'complete', finished_at = ? WHERE id = ? AND status = 'running'",
                        (now, suite_id))
