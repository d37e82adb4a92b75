"""Experiment metrics: ``GET /v1/metrics/experiments/{id}``, the RunResults ``metrics`` block, the
summary cached on a finished experiment (history, compare, alerts).

Definitions (documented in the OpenAPI description of the metrics endpoint):

- a *run* is one replica run of one scenario; only finished runs count;
- ``pass_rate`` = passed runs / finished runs (errored runs count as not passed), with a 95%
  Wilson interval ``pass_rate_ci``;
- wall time is measured by the scheduler around the whole scenario (sandbox boot, setup, agent,
  scoring, teardown): ``mean_wall_ms``, ``p95_wall_ms`` (nearest rank);
- cost is the runner's reported cost of a run, else the sum of its trace events' ``cost_usd``;
  ``total_cost_usd`` adds the events stamped with the experiment but with none of its runs (an
  agent's OTLP export that names only ``svc.experiment_id``);
- tool metrics come from the run's ``tool_call`` trace events (one per executed tool call, the
  ``end``/``complete`` row of each span): ``total_tool_calls``, ``tool_success_rate`` (status ok),
  ``tool_breakdown`` per tool ``{count, mean_ms, error_rate}``.
"""
from __future__ import annotations

import logging
from typing import Any, Awaitable

from daemon.experiments.results import job_cost, run_metrics
from daemon.experiments.stats import mean
from daemon.store import jobs as job_store
from daemon.store import traces as trace_store
from daemon.store.db import Store, loads

log = logging.getLogger("svcd.experiments")

async def _trace_rows(rows: Awaitable[list[Any]]) -> list[Any]:
    try:
        return await rows
    except Exception as exc:  # a store without the trace tables has no trace rows
        if "no such table" in str(exc) or "no such column" in str(exc):
            return []
        raise


async def trace_costs(store: Store, tenant_id: str, group_id: str) -> dict[str, float]:
    rows = await _trace_rows(trace_store.cost_by_run(store, tenant_id, group_id))
    return {r["run_id"]: float(r["cost"]) for r in rows if r["cost"] is not None}


async def trace_ids_by_run(store: Store, tenant_id: str, group_id: str) -> dict[str, list[str]]:
    rows = await _trace_rows(trace_store.trace_ids_of_runs(store, tenant_id, group_id))
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["run_id"], []).append(r["trace_id"])
    return out


async def tool_stats(store: Store, tenant_id: str, experiment_id: str) -> tuple[int, float | None, dict[str, Any]]:
    rows = await _trace_rows(trace_store.tool_call_rows(store, tenant_id, experiment_id))
    per_tool: dict[str, dict[str, Any]] = {}
    ok = 0
    for r in rows:
        tool = r["tool"] or "?"
        entry = per_tool.setdefault(tool, {"count": 0, "errors": 0, "durations": []})
        entry["count"] += 1
        if r["status"] == "error":
            entry["errors"] += 1
        else:
            ok += 1
        if r["duration_ms"] is not None:
            entry["durations"].append(r["duration_ms"])
    breakdown = {
        tool: {
            "count": e["count"],
            "mean_ms": round(mean(e["durations"]), 3) if e["durations"] else None,
            "error_rate": round(e["errors"] / e["count"], 6),
        }
        for tool, e in sorted(per_tool.items())
    }
    total = len(rows)
    return total, (round(ok / total, 6) if total else None), breakdown


def _violations(job: Any) -> int:
    run = loads(job["result"], None) or {}
    violations = run.get("violations") or run.get("forbidden_violations") or []
    return len(violations) if isinstance(violations, list) else 0


async def _jobs(store: Store, experiment_id: str) -> list[Any]:
    return await job_store.of_group(store, experiment_id, "done")


async def _imported_summary(store: Store, experiment_id: str) -> dict[str, Any] | None:
    """The summary an imported experiment was exported with; None for one that ran here."""
    from daemon.store import experiments as experiment_store

    row = await experiment_store.get(store, experiment_id)
    if row is None or "imported" not in row.keys() or not row["imported"]:
        return None
    return loads(row["summary"], None) or {}


async def summary_for(store: Store, tenant_id: str, experiment_id: str, jobs: list[Any] | None = None,
                      costs: dict[str, float] | None = None) -> dict[str, Any]:
    """SPEC's metrics summary plus the run counts and alert metrics."""
    jobs = jobs if jobs is not None else await _jobs(store, experiment_id)
    costs = costs if costs is not None else await trace_costs(store, tenant_id, experiment_id)
    base = run_metrics(jobs, costs)
    outside = await _trace_rows(trace_store.cost_outside_runs(store, tenant_id, experiment_id)) or 0.0
    total_cost = round(base["total_cost_usd"] + outside, 8)
    tool_calls, tool_success, _ = await tool_stats(store, tenant_id, experiment_id)
    finished = [j for j in jobs if j["status"] is not None]
    imported = await _imported_summary(store, experiment_id)
    if imported is not None:  # its trace events stayed in the daemon that ran it: their figures come with the bundle
        tool_calls, tool_success = imported.get("total_tool_calls") or 0, imported.get("tool_success_rate")
    return {
        "total_runs": base["runs"],
        "passed_runs": base["passed_runs"],
        "failed_runs": base["failed_runs"],
        "errored_runs": base["errored_runs"],
        "pass_rate": base["pass_rate"],
        "pass_rate_ci": base["pass_rate_ci"],
        "total_cost_usd": total_cost,
        "mean_cost_per_run_usd": round(total_cost / len(finished), 8) if finished else None,
        "mean_wall_ms": base["mean_wall_ms"],
        "p95_wall_ms": base["p95_wall_ms"],
        "total_tool_calls": tool_calls,
        "mean_tool_calls": round(tool_calls / len(finished), 6) if finished else None,
        "tool_success_rate": tool_success,
        "side_effect_violations": sum(_violations(j) for j in finished),
    }


async def experiment_metrics(store: Store, tenant_id: str, experiment_id: str) -> dict[str, Any]:
    """The body of ``GET /v1/metrics/experiments/{id}``."""
    jobs = await _jobs(store, experiment_id)
    costs = await trace_costs(store, tenant_id, experiment_id)
    summary = await summary_for(store, tenant_id, experiment_id, jobs, costs)
    _total, _rate, breakdown = await tool_stats(store, tenant_id, experiment_id)
    cost_trend, pass_trend = [], []
    passed = finished = 0
    for job in jobs:
        if job["status"] is None:
            continue
        finished += 1
        passed += job["status"] == "passed"
        cost = job_cost(job, costs)
        common = {"run_id": job["run_id"], "scenario_id": job["scenario_id"], "replica_index": job["replica_index"], "ts": job["finished_at"]}
        cost_trend.append({**common, "cost_usd": cost if cost is not None else 0.0})
        pass_trend.append({**common, "status": job["status"], "pass_rate": round(passed / finished, 6)})
    return {
        "experiment_id": experiment_id,
        "summary": summary,
        "tool_breakdown": breakdown,
        "cost_trend": cost_trend,
        "pass_rate_trend": pass_trend,
    }
