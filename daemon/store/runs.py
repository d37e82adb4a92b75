"""The ``runs`` table: every statement on run rows, and `RunRow`, the typed row they return
(:mod:`daemon.runner.records` re-exports ``insert``/``get``/``update``; the run lifecycle uses the rest).

A scenario run touches its row through `start` (the row as it begins, from the write itself),
`update` for what live readers follow (its sandbox, its agent, a model recording the gateway
reads) and `finish` (its verdict and result, written once); it never reads it back."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Mapping

from daemon.store.db import Store, dumps, loads
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


# Columns holding JSON: RunRow holds them decoded, `update` encodes what it is given decoded.
JSON_COLUMNS = ("inputs", "matrix_entry", "secret_names", "result", "model_spend", "pins")


@dataclass(frozen=True)
class RunRow:
    """One row of ``runs``, its JSON columns decoded (`result` is {} until the run has one)."""

    seq: int
    id: str
    tenant_id: str
    spec_id: str
    spec_version: int
    sandbox_id: str | None
    own_sandbox: bool
    status: str
    verdict: str | None
    reason: str | None
    score: float | None
    seed: str
    inputs: dict[str, Any] | None
    matrix_entry: dict[str, Any] | None
    secret_names: list[str]
    experiment_id: str | None
    scenario_id: str | None
    replay_of: str | None
    agent: str | None
    result: dict[str, Any]
    trajectory_digest: str | None
    duration_ms: int | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    models: str | None  # live | replayed, once the model gateway served the run
    model_recording: str | None
    model_spend: dict[str, Any] | None
    pins: dict[str, Any] | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> RunRow:
        values = {f.name: row[f.name] for f in dataclasses.fields(cls)}
        for key in JSON_COLUMNS:
            values[key] = loads(values[key], None)
        values["result"] = values["result"] if isinstance(values["result"], dict) else {}
        values["secret_names"] = values["secret_names"] or []
        values["own_sandbox"] = bool(values["own_sandbox"])
        return cls(**values)

    def with_fields(self, **fields: Any) -> RunRow:
        """This row after `update(store, self.id, **fields)` (JSON columns given decoded)."""
        return dataclasses.replace(self, **fields)


async def get(store: Store, run_id: str) -> RunRow | None:
    row = await store.fetchone("SELECT * FROM runs WHERE id = ?", (run_id,))
    return RunRow.of(row) if row is not None else None


def _encoded(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: dumps(v) if k in JSON_COLUMNS and v is not None and not isinstance(v, str) else v for k, v in fields.items()}


async def update(store: Store, run_id: str, **fields: Any) -> None:
    if not fields:
        return
    fields = _encoded(fields)
    assignments = ", ".join(f"{k} = ?" for k in fields)
    await store.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*fields.values(), run_id))


async def start(
    store: Store,
    *,
    run_id: str,
    tenant_id: str,
    spec_id: str,
    spec_version: int,
    seed: str,
    started_at: str,
    sandbox_id: str | None = None,
    inputs: dict | None = None,
    matrix_entry: dict | None = None,
    secret_names: list[str] | None = None,
    experiment_id: str | None = None,
    scenario_id: str | None = None,
) -> RunRow:
    """The run row `running` from `started_at`, created when it does not exist (an experiment's
    replica) and its previous outcome cleared when it does (a queued run, a retried attempt): the
    row as written, without reading it back."""
    async with store.transaction() as tx:
        row = await tx.fetchone(
            "INSERT INTO runs (id, tenant_id, spec_id, spec_version, sandbox_id, own_sandbox, status, seed, inputs,"
            " matrix_entry, secret_names, experiment_id, scenario_id, created_at, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET status = 'running', started_at = excluded.started_at, finished_at = NULL,"
            " verdict = NULL, reason = NULL, score = NULL, result = NULL, trajectory_digest = NULL RETURNING *",
            (
                run_id, tenant_id, spec_id, spec_version, sandbox_id, 0 if sandbox_id else 1, seed,
                dumps(inputs) if inputs else None, dumps(matrix_entry) if matrix_entry else None,
                dumps(sorted(secret_names)) if secret_names else None, experiment_id, scenario_id, started_at, started_at,
            ),
        )
    assert row is not None  # RETURNING always answers the row it wrote
    return RunRow.of(row)


async def finish(store: Store, row: RunRow, **fields: Any) -> RunRow:
    """The run's outcome (status, verdict, result, ...), written once; the row as it now is."""
    await update(store, row.id, **fields)
    return row.with_fields(**fields)


async def ids_with_status(store: Store, status: str) -> list[str]:
    return [row["id"] for row in await store.fetchall("SELECT id FROM runs WHERE status = ? ORDER BY seq", (status,))]


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
