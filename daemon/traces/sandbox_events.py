"""A sandbox's own trace events, however they arrive (POSTed with its token over the sandbox socket,
or dropped in a file by an agent on a swarm node: drop.py): stamped with the daemon's ids for the
sandbox, redacted of its secret values, model calls the gateway counted demoted."""
from __future__ import annotations

import json
import sqlite3
from typing import Any

from aiohttp import web

from daemon.appkeys import SANDBOXES
from daemon.http import STORE
from daemon.sandbox.redact import Redactor
from daemon.store import runs as run_store
from daemon.store import sandboxes as sandbox_store
from daemon.store.db import Store
from daemon.traces import gateway

# Ids an agent cannot choose: with a sandbox token they come from the daemon's own records.
STAMPED_IDS = ("run_id", "experiment_id", "scenario_id")


async def sandbox_stamps(store: Store, tenant_id: str, sandbox_id: str) -> dict[str, str | None]:
    """run_id, experiment_id and scenario_id of the sandbox from the daemon's records: the newest run
    using it, else the sandbox's metadata (what the runner booted it with); None where unknown."""
    try:
        run = await run_store.newest_of_sandbox(store, tenant_id, sandbox_id)
    except sqlite3.OperationalError:
        run = None
    if run is not None:
        return {"run_id": run["id"], "experiment_id": run["experiment_id"], "scenario_id": run["scenario_id"]}
    try:
        row = await sandbox_store.metadata_of(store, tenant_id, sandbox_id)
    except sqlite3.OperationalError:
        row = None
    try:
        metadata = json.loads(row["metadata"]) if row is not None and row["metadata"] else {}
    except (ValueError, TypeError, IndexError):
        metadata = {}
    if not isinstance(metadata, dict):
        metadata = {}
    return {name: metadata[name] if isinstance(metadata.get(name), str) else None for name in STAMPED_IDS}


async def stamp_sandbox_rows(app: web.Application, tenant_id: str, sandbox_id: str,
                             rows: list[tuple[int, dict[str, Any]]]) -> None:
    """Every event carries its sandbox's own ids, whatever the body says (an agent cannot file
    events under another run, experiment or scenario)."""
    if not rows:
        return
    stamps = await sandbox_stamps(app[STORE], tenant_id, sandbox_id)
    for _, row in rows:
        row["sandbox_id"] = sandbox_id
        row.update(stamps)
    manager = app.get(SANDBOXES)
    if manager is not None and gateway.counted_by_gateway(manager.runtime(sandbox_id)):
        gateway.demote_model_calls(rows)


# Columns of a stored event that can carry what the agent sent (ids and timestamps cannot).
REDACTED_COLUMNS = ("input", "output", "metadata", "tool", "error_type", "agent", "agent_version", "model", "cost",
                    "run_id", "experiment_id", "scenario_id")


def sandbox_redactor(app: web.Application, sandbox_id: str | None) -> Redactor | None:
    """The live sandbox's secret values (resolved and sent with the request), or None."""
    if sandbox_id is None:
        return None
    manager = app.get(SANDBOXES)
    runtime = manager.runtime(sandbox_id) if manager is not None and hasattr(manager, "runtime") else None
    if runtime is None:
        return None
    redactor = Redactor(runtime.secret_values())
    return redactor or None


def redact_rows(rows: list[tuple[int, dict[str, Any]]], redactor: Redactor | None) -> None:
    """Second pass over what will be stored (the body was redacted before it was cut to size)."""
    if redactor is None:
        return
    for _, row in rows:
        for column in REDACTED_COLUMNS:
            value = row.get(column)
            if isinstance(value, str):
                row[column] = redactor.text(value)
