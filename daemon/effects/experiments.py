"""The effects section of `svc eval compare`: each scenario matched by matrix entry between the
baseline and candidate experiments, its runs' ledgers compared (daemon/effects/replicas.py)."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from daemon.contract.effects import RunEffects, ScenarioEffects
from daemon.effects.load import NoTrajectory, run_effects
from daemon.effects.replicas import scenario_differences
from daemon.store import runs as run_store

log = logging.getLogger("svcd.effects")

MAX_RUNS = 2000  # per comparison: each ledger reads a trajectory blob


def entry_key(entry: Any) -> str:
    return json.dumps(entry or {}, sort_keys=True, separators=(",", ":"))


def run_ids(scenario: dict[str, Any]) -> list[str]:
    """The scenario's latest run per replica (retries replaced), in replica order."""
    runs = sorted(scenario.get("runs") or [], key=lambda r: r.get("index", 0))
    return [r["run_id"] for r in runs if r.get("run_id")] or list(scenario.get("run_ids") or [])


async def ledgers(store: Any, blobs_dir: Path, tenant_id: str, ids: list[str],
                  cache: dict[tuple[str, int], set[str]]) -> list[RunEffects]:
    out = []
    for run_id in ids:
        row = await run_store.get(store, run_id)
        if row is None or row.tenant_id != tenant_id:
            continue
        try:
            out.append(await run_effects(store, blobs_dir, row, cache))
        except (NoTrajectory, ValueError, OSError) as exc:
            log.debug("no effects for run %s: %s", run_id, exc)
    return out


async def compare_effects(store: Any, blobs_dir: Path, tenant_id: str, baseline: list[dict[str, Any]],
                          candidate: list[dict[str, Any]]) -> list[ScenarioEffects]:
    """Scenarios (matched by matrix entry) whose runs' effects differ, between the experiments or
    between one side's replicas; scenarios past MAX_RUNS runs are not read."""
    cand = {entry_key(s.get("matrix_entry")): s for s in candidate}
    cache: dict[tuple[str, int], set[str]] = {}
    out, read = [], 0
    for b in baseline:
        c = cand.get(entry_key(b.get("matrix_entry")))
        if c is None:
            continue
        ids_b, ids_c = run_ids(b), run_ids(c)
        read += len(ids_b) + len(ids_c)
        if read > MAX_RUNS:
            break
        runs_b = await ledgers(store, blobs_dir, tenant_id, ids_b, cache)
        runs_c = await ledgers(store, blobs_dir, tenant_id, ids_c, cache)
        differences = scenario_differences(runs_b, runs_c)
        if differences:
            out.append(ScenarioEffects(matrix_entry=b.get("matrix_entry") or {}, baseline_runs=[r.run_id for r in runs_b],
                                       candidate_runs=[r.run_id for r in runs_c], differences=differences))
    return out
