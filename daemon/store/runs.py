"""The ``runs`` table: the SQL of the run lifecycle (rows are written by
:mod:`daemon.runner.records` and the scenario runner)."""
from __future__ import annotations

from typing import Any

import json

from daemon.store.db import Store
from daemon.util import now_iso


async def ids_with_status(store: Store, status: str) -> list[Any]:
    return await store.fetchall("SELECT id, tenant_id FROM runs WHERE status = ? ORDER BY seq", (status,))


async def queued_standalone(store: Store) -> list[Any]:
    """Queued ``/v1/runs`` runs (not experiment runs), oldest first."""
    return await store.fetchall(
        "SELECT id, tenant_id, spec_id, spec_version, secret_names FROM runs"
        " WHERE status = 'queued' AND experiment_id IS NULL ORDER BY seq"
    )


async def error_unfinished(store: Store, run_id: str, reason: str, result: dict[str, Any]) -> int:
    """Terminal ``errored`` for a run still queued or running; the number of rows changed."""
    return await store.execute(
        "UPDATE runs SET status = 'errored', verdict = 'error', reason = ?, result = ?, finished_at = ?"
        " WHERE id = ? AND status IN ('queued', 'running')",
        (reason, json.dumps(result), now_iso(), run_id),
    )
