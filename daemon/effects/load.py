"""Read what a ledger is built from: the run's trajectory blob and its spec's `audit` switches."""
from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from daemon.contract.effects import RunEffects
from daemon.effects.ledger import build
from daemon.store.runs import RunRow

log = logging.getLogger("svcd.effects")


class NoTrajectory(LookupError):
    """The run has not finished, or its trajectory is gone from the blob store."""


async def shown_types(store: Any, tenant_id: str, spec_id: str, version: int,
                      cache: dict[tuple[str, int], set[str]] | None = None) -> set[str]:
    """The audit event types the spec version's `audit` switches keep in its runs' trajectories."""
    from daemon.sandbox.audit import AUDIT_TYPES, hidden_types
    from daemon.spec import load_spec
    from daemon.store import specs as spec_store

    key = (spec_id, version)
    if cache is not None and key in cache:
        return cache[key]
    shown = set(AUDIT_TYPES)
    record = await spec_store.get(store, tenant_id, spec_id, version)
    if record is not None:
        try:
            shown -= hidden_types(load_spec(record["yaml"], f"{record['id']}.yaml").audit)
        except Exception as exc:  # noqa: BLE001 - a spec this build no longer reads: every type counts
            log.warning("spec %s v%s does not load for its effects: %s", spec_id, version, exc)
    if cache is not None:
        cache[key] = shown
    return shown


def read_trajectory(blobs_dir: Path, digest: str) -> dict[str, Any]:
    from daemon.agents.blobs import Blobs

    try:
        data = Blobs(blobs_dir).path(digest).read_bytes()
    except FileNotFoundError:
        raise NoTrajectory("its trajectory is gone from the blob store") from None
    value = json.loads(data)
    return value if isinstance(value, dict) else {}


async def run_effects(store: Any, blobs_dir: Path, row: RunRow,
                      cache: dict[tuple[str, int], set[str]] | None = None) -> RunEffects:
    """The ledger of the run `row`; NoTrajectory when there is nothing to read yet."""
    if not row.trajectory_digest:
        raise NoTrajectory(f"it is {row.status} and has no trajectory yet")
    trajectory = await asyncio.to_thread(read_trajectory, blobs_dir, row.trajectory_digest)
    shown = await shown_types(store, row.tenant_id, row.spec_id, row.spec_version, cache)
    return build(trajectory, {k: getattr(row, k) for k in ("id", "spec_id", "spec_version", "experiment_id", "scenario_id",
                                                           "status")}, shown)
