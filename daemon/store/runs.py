"""The ``runs`` table: every statement on run rows (:mod:`daemon.runner.records` re-exports
``insert``/``get``/``update``; the run lifecycle uses the rest)."""
from __future__ import annotations

from typing import Any

import json

from daemon.store.db import Store, dumps
from daemon.store.pagination import RowPage, newest_first
from daemon.util import now_iso


async def insert(
    store: Store,
    *,
    run_id: str,
    tenant_id: str,
    spec_id: str,
    spec_version: int,
    seed: str,
    status: str = "queued",
    sandbox_id: str | None = None,
    inputs: dict | None = None,
    matrix_entry: dict | None = None,
    secret_names: list[str] | None = None,
    experiment_id: str | None = None,
    scenario_id: str | None = None,
    replay_of: str | None = None,
) -> None:
    await store.execute(
        "INSERT INTO runs (id, tenant_id, spec_id, spec_version, sandbox_id, own_sandbox, status, seed, inputs, matrix_entry,"
        " secret_names, experiment_id, scenario_id, replay_of, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id, tenant_id, spec_id, spec_version, sandbox_id, 0 if sandbox_id else 1, status, seed,
            dumps(inputs) if inputs else None, dumps(matrix_entry) if matrix_entry else None,
            dumps(sorted(secret_names)) if secret_names else None, experiment_id, scenario_id, replay_of, now_iso(),
        ),
    )


async def get(store: Store, run_id: str) -> Any:
    return await store.fetchone("SELECT * FROM runs WHERE id = ?", (run_id,))


async def update(store: Store, run_id: str, **fields: Any) -> None:
    if not fields:
        return
    for key in ("result", "inputs", "matrix_entry"):
        if key in fields and fields[key] is not None and not isinstance(fields[key], str):
            fields[key] = dumps(fields[key])
    assignments = ", ".join(f"{k} = ?" for k in fields)
    await store.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*fields.values(), run_id))


async def ids_with_status(store: Store, status: str) -> list[Any]:
    return await store.fetchall("SELECT id, tenant_id FROM runs WHERE status = ? ORDER BY seq", (status,))


async def error_unfinished(store: Store, run_id: str, reason: str, result: dict[str, Any]) -> int:
    """Terminal ``errored`` for a run still queued or running; the number of rows changed."""
    return await store.execute(
        "UPDATE runs SET status = 'errored', verdict = 'error', reason = ?, result = ?, finished_at = ?"
        " WHERE id = ? AND status IN ('queued', 'running')",
        (reason, json.dumps(result), now_iso(), run_id),
    )


async def newest_of_sandbox(store: Store, tenant_id: str, sandbox_id: str) -> Any:
    """A row of id, experiment_id, scenario_id: the tenant's newest run using the sandbox, or None."""
    return await store.fetchone("SELECT id, experiment_id, scenario_id FROM runs WHERE sandbox_id = ? AND tenant_id = ?"
                                " ORDER BY seq DESC LIMIT 1", (sandbox_id, tenant_id))


async def of_group(store: Store, tenant_id: str, group_id: str) -> list[Any]:
    """The tenant's run rows of a job group's jobs, in the order they were created."""
    return await store.fetchall(
        "SELECT * FROM runs WHERE tenant_id = ? AND id IN (SELECT run_id FROM scenario_jobs WHERE group_id = ?) ORDER BY seq",
        [tenant_id, group_id],
    )


# Columns a run listing filters on (equality).
PAGE_FILTERS = ("status", "spec_id", "experiment_id", "scenario_id", "sandbox_id", "replay_of")


async def page(store: Store, tenant_id: str, limit: int, after: int | None, **filters: str) -> RowPage:
    """A page (newest first) of the tenant's run rows with each of `filters` (PAGE_FILTERS) equal to its value."""
    sql = "SELECT * FROM runs WHERE tenant_id = ?"
    params: list[Any] = [tenant_id]
    for name, value in filters.items():
        if name not in PAGE_FILTERS:
            raise ValueError(f"runs cannot be filtered on {name!r}")
        sql += f" AND {name} = ?"
        params.append(value)
    return await newest_first(store, sql, params, limit, after)
