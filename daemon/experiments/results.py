"""Response bodies built from stored rows: replica runs, scenarios, RunResults, replica suites."""
from __future__ import annotations

import json
import shlex
from typing import Any, Iterable

from daemon.experiments.gate import pass_k_table
from daemon.experiments.stats import aggregate_replicas, mean, percentile, wilson_interval
from daemon.store.db import loads

RUN_VERDICT = {"passed": "pass", "failed": "fail", "errored": "error"}
TERMINAL_EXPERIMENT = ("completed", "failed", "cancelled")


def experiment_record(row: Any, completed_runs: int | None = None) -> dict[str, Any]:
    """The created/list shape: SPEC's {id, name, spec_id, status, created_at} plus progress."""
    summary = loads(row["summary"], None)
    return {
        "id": row["id"],
        "name": row["name"],
        "spec_id": row["spec_id"],
        "spec_version": row["spec_version"],
        "status": row["status"],
        "created_at": row["created_at"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "total_runs": row["total_runs"],
        "completed_runs": completed_runs,
        "replicas": row["replicas"],
        "concurrency": row["concurrency"],
        "matrix": loads(row["matrix"], []),
        "seed": row["base_seed"],
        "filter_failing_from": row["filter_failing_from"],
        "secret_names": loads(row["secret_names"], []),
        "error": row["error"],
        "summary": summary,
        "imported": loads(row["imported"], None) if "imported" in row.keys() else None,
    }


def run_cost(run: dict[str, Any] | None) -> float | None:
    """A run's cost in USD: the runner's ``cost.total_usd`` (``estimated_usd`` from a trace-shaped
    cost object, or a bare number, are read too)."""
    cost = run.get("cost") if isinstance(run, dict) else None
    if isinstance(cost, dict):
        cost = cost.get("total_usd", cost.get("estimated_usd"))
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def reproducer_command(spec_id: str, spec_version: int, seed: str, inputs: Any, matrix_entry: dict | None) -> str:
    """A command that replays exactly one replica: same spec version, seed, inputs and matrix entry
    (the same command line the runner puts in a run's reproducer)."""
    try:
        from daemon.runner.records import reproducer as runner_reproducer

        return runner_reproducer(spec_id, spec_version, seed, inputs or None, matrix_entry or None)["command"]
    except Exception:
        pass
    parts = ["svc", "runs", "create", "--spec", spec_id, "--spec-version", str(spec_version), "--seed", seed]
    if inputs:
        parts += ["--inputs", json.dumps(inputs, separators=(",", ":"), sort_keys=True)]
    if matrix_entry:
        parts += ["--matrix", json.dumps(matrix_entry, separators=(",", ":"), sort_keys=True)]
    parts.append("--wait")
    return " ".join(shlex.quote(p) for p in parts)


def reproducer(spec_id: str, spec_version: int, seed: str, inputs: Any, matrix_entry: dict | None, run: dict | None,
               dataset: dict | None = None) -> dict[str, Any]:
    """The replica's reproducer; over a dataset (`dataset` {id, version}) it names the record too, and
    shows the inputs the run had (the record's input over the experiment's)."""
    theirs = (run or {}).get("reproducer") if isinstance(run, dict) else None
    theirs = theirs if isinstance(theirs, dict) else {}
    record_id = (matrix_entry or {}).get("record_id")
    ref = {"id": dataset["id"], "version": dataset["version"], "record_id": record_id} if dataset and record_id else None
    if ref is not None and isinstance(theirs.get("inputs"), dict):
        inputs = theirs["inputs"]
    return {
        "command": theirs.get("command") or reproducer_command(spec_id, spec_version, seed, inputs, matrix_entry),
        "spec_id": spec_id,
        "spec_version": spec_version,
        "seed": seed,
        "inputs": inputs or {},
        "matrix_entry": matrix_entry or {},
        "dataset": ref,
        "pins": theirs.get("pins"),
    }


def replica_view(job: Any, spec_id: str, spec_version: int, inputs: Any, matrix_entry: dict | None,
                 trace_ids: dict[str, list[str]] | None = None, trace_costs: dict[str, float] | None = None,
                 dataset: dict | None = None) -> dict[str, Any]:
    """One replica run of a scenario."""
    run = loads(job["result"], None) or {}
    status = job["status"]
    if job["state"] in ("pending", "queued", "running"):
        shown = job["state"]
    elif job["state"] == "cancelled" and status is None:
        shown = "cancelled"
    else:
        shown = status
    return {
        "index": job["replica_index"],
        "seed": job["seed"],
        "run_id": job["run_id"],
        "status": shown,
        "verdict": RUN_VERDICT.get(status) if status else None,
        "score": job["score"],
        "invariant_results": run.get("invariant_results") or [],
        "duration_ms": run.get("duration_ms"),
        "wall_ms": job["wall_ms"],
        "cost_usd": job_cost(job, trace_costs),
        "error": job["error"],
        "reason": run.get("reason"),
        "attempts": job["attempts"],
        "previous_run_ids": loads(job["previous_run_ids"], []),
        "trace_ids": (trace_ids or {}).get(job["run_id"], []),
        "trajectory_url": run.get("trajectory_url"),
        "reproducer": reproducer(spec_id, spec_version, job["seed"], inputs, matrix_entry, run, dataset),
        "started_at": job["started_at"],
        "finished_at": job["finished_at"],
    }


def invariant_summary(replicas: list[dict[str, Any]]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Mean score per invariant over the replicas that reported it, and pass/fail/skip counts."""
    scores: dict[str, list[float]] = {}
    counts: dict[str, dict[str, Any]] = {}
    for rep in replicas:
        for inv in rep.get("invariant_results") or []:
            if not isinstance(inv, dict):
                continue
            key = str(inv.get("invariant_id") or inv.get("name") or "?")
            entry = counts.setdefault(key, {"invariant_id": key, "name": inv.get("name") or key, "passed": 0, "failed": 0, "skipped": 0})
            status = inv.get("status")
            if status in ("passed", "failed", "skipped"):
                entry[status] += 1
            if status == "skipped":
                continue
            score = inv.get("score")
            if not isinstance(score, (int, float)):
                score = 1.0 if status == "passed" else 0.0
            scores.setdefault(key, []).append(float(score))
    means = {k: round(sum(v) / len(v), 6) for k, v in scores.items()}
    for key, entry in counts.items():
        entry["score"] = means.get(key)
    return means, list(counts.values())


def scenario_status(jobs: list[Any], experiment_status: str, aggregated: dict[str, Any]) -> str:
    finished = sum(1 for j in jobs if j["status"] is not None)
    return status_of({j["state"] for j in jobs}, finished, len(jobs), experiment_status, aggregated)


def status_of(states: set[str], finished: int, total: int, experiment_status: str, aggregated: dict[str, Any]) -> str:
    """A scenario's status from the states its jobs are in and how many of them finished."""
    if states & {"running"}:
        return "running"
    if states & {"queued"}:
        return "queued"
    if states & {"pending"}:
        return "cancelled" if experiment_status in TERMINAL_EXPERIMENT else "created"
    if finished < total:  # some replica never ran (cancelled before it started)
        return "cancelled"
    return aggregated["verdict"]


def scenario_view(scn: Any, jobs: list[Any], *, spec_id: str, spec_version: int, inputs: Any, strategy: str,
                  min_pass_rate: float | None, experiment_status: str, trace_ids: dict[str, list[str]] | None = None,
                  trace_costs: dict[str, float] | None = None, include_runs: bool = True,
                  dataset: dict | None = None) -> dict[str, Any]:
    entry = loads(scn["matrix_entry"], {})
    replicas = [replica_view(j, spec_id, spec_version, inputs, entry, trace_ids, trace_costs, dataset) for j in jobs]
    finished = [j for j in jobs if j["status"] is not None]
    aggregated = aggregate_replicas([j["status"] for j in finished], strategy, min_pass_rate)
    status = scenario_status(jobs, experiment_status, aggregated)
    done = status in ("pass", "fail", "flaky", "error")
    invariant_scores, invariants = invariant_summary([r for r in replicas if r["verdict"]])
    scores = [j["score"] for j in finished if j["score"] is not None]
    costs = [c for c in (job_cost(j, trace_costs) for j in finished) if c is not None]
    walls = [j["wall_ms"] for j in finished if j["wall_ms"] is not None]
    # The reproducer points at the first replica that did not pass (every failure comes with one),
    # else the first replica.
    failing = next((r for r in replicas if r["verdict"] in ("fail", "error")), None)
    chosen = failing or (replicas[0] if replicas else None)
    at_k, hat_k = pass_k_table(len(finished), aggregated["passed_runs"]) if done else ({}, {})
    body = {
        "id": scn["id"],
        "experiment_id": scn["experiment_id"],
        "index": scn["matrix_index"],
        "matrix_entry": entry,
        "status": status,
        "verdict": aggregated["verdict"] if done else None,
        "passed": aggregated["passed"] if done else None,
        "replicas": scn["replicas"],
        "completed_runs": len(finished),
        "passed_runs": aggregated["passed_runs"],
        "failed_runs": aggregated["failed_runs"],
        "errored_runs": aggregated["errored_runs"],
        "pass_rate": aggregated["pass_rate"],
        "pass_rate_ci": aggregated["pass_rate_ci"],
        "score": round(sum(scores) / len(scores), 6) if scores else None,
        "invariant_scores": invariant_scores,
        "invariants": invariants,
        "cost_usd": round(sum(costs), 8) if costs else (0.0 if finished else None),
        "mean_wall_ms": round(mean(walls)) if walls else None,
        "seeds": [j["seed"] for j in jobs],
        "run_ids": [j["run_id"] for j in jobs],
        "trace_ids": sorted({t for r in replicas for t in r["trace_ids"]}),
        "errors": sorted({j["error"] for j in finished if j["error"]}),
        "reproducer": dict(chosen["reproducer"], replica_index=chosen["index"], run_id=chosen["run_id"]) if chosen else None,
        "finished_at": scn["finished_at"],
        "pass_at_k": at_k,
        "pass_hat_k": hat_k,
        "retried_runs": sum(len(r["previous_run_ids"]) for r in replicas),
    }
    if include_runs:
        body["runs"] = replicas
    return body


def attach_records(views: list[dict[str, Any]], dataset: dict[str, Any] | None, rows: dict[str, Any]) -> None:
    """Each dataset scenario's record ({id, key, input, expected}) from `rows` (records by id), so a
    report says which input failed without a second lookup; None for a scenario of no record of
    the experiment's dataset (a record of another dataset is never shown)."""
    for view in views:
        record_id = (view.get("matrix_entry") or {}).get("record_id")
        row = rows.get(record_id) if dataset and isinstance(record_id, str) else None
        if row is None or row["dataset_id"] != dataset["id"]:
            view["record"] = None
            continue
        content = loads(row["content"], {}) or {}
        view["record"] = {"id": row["id"], "key": row["key"], "input": content.get("input"), "expected": content.get("expected")}


def verdict_counts(scenarios: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "flaky": 0, "error": 0}
    for scn in scenarios:
        if scn.get("verdict") in counts:
            counts[scn["verdict"]] += 1
    return counts


def job_cost(job: Any, trace_costs: dict[str, float] | None = None) -> float | None:
    """The runner's reported cost, else the sum of the run's trace-event costs."""
    if job["cost_usd"] is not None:
        return job["cost_usd"]
    if trace_costs is not None and job["run_id"] in trace_costs:
        return trace_costs[job["run_id"]]
    return None


# The parts of a run's time budget (Run.timings), in the order a run goes through them; setup_ms is
# part of boot_ms (the spec's setup commands), claim_ms replaces boot_ms for a pooled sandbox.
TIME_BUDGET = ("queue_ms", "boot_ms", "claim_ms", "setup_ms", "task_ms", "agent_ms", "leftovers_ms", "snapshot_ms",
               "checks_ms", "forbidden_ms", "exports_ms", "teardown_ms")


def time_budget(jobs: list[Any]) -> dict[str, int]:
    """Each part of the time budget summed over the finished runs (their `timings`), in TIME_BUDGET order."""
    totals: dict[str, int] = {}
    for job in jobs:
        if job["status"] is None:
            continue
        timings = (loads(job["result"], None) or {}).get("timings")
        if not isinstance(timings, dict):
            continue
        for part, ms in timings.items():
            if part in TIME_BUDGET and isinstance(ms, (int, float)) and not isinstance(ms, bool):
                totals[part] = totals.get(part, 0) + int(ms)
    return {part: totals[part] for part in TIME_BUDGET if part in totals}


def concurrency_used(jobs: list[Any]) -> dict[str, int | None]:
    """{min, max} of the global limits the runs started under (daemon/runner/concurrency.py)."""
    limits = [j["concurrency"] for j in jobs if j["concurrency"] is not None]
    return {"min": min(limits) if limits else None, "max": max(limits) if limits else None}


def run_metrics(jobs: list[Any], trace_costs: dict[str, float] | None = None) -> dict[str, Any]:
    """Run-level numbers over finished replica runs (the basis of pass_rate everywhere)."""
    finished = [j for j in jobs if j["status"] is not None]
    passed = sum(1 for j in finished if j["status"] == "passed")
    failed = sum(1 for j in finished if j["status"] == "failed")
    errored = sum(1 for j in finished if j["status"] == "errored")
    costs = [c for c in (job_cost(j, trace_costs) for j in finished) if c is not None]
    walls = [j["wall_ms"] for j in finished if j["wall_ms"] is not None]
    n = len(finished)
    total_cost = round(sum(costs), 8) if costs else 0.0
    ci = wilson_interval(passed, n)
    return {
        "runs": n,
        "passed_runs": passed,
        "failed_runs": failed,
        "errored_runs": errored,
        "pass_rate": round(passed / n, 6) if n else None,
        "pass_rate_ci": list(ci) if ci else None,
        "total_cost_usd": total_cost,
        "mean_cost_per_run_usd": round(total_cost / n, 8) if n else None,
        "mean_wall_ms": round(mean(walls)) if walls else None,
        "p95_wall_ms": percentile(walls, 95),
    }
