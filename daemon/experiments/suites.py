"""Replica suites: n runs of one spec with one seed each, aggregated into a flakiness verdict.

Status: ``running`` on creation (202) -> ``complete`` when every replica finished, ``errored`` when
the suite itself could not proceed (its spec version vanished). ``passed`` counts passed replicas,
``failed`` every replica that did not pass (failed or errored; ``errored`` is the subset that
errored), ``failure_rate`` = failed / finished.
"""
from __future__ import annotations

from typing import Any

from daemon.experiments import seeds
from daemon.experiments.results import reproducer
from daemon.experiments.service import ExperimentService, GroupContext
from daemon.experiments.stats import aggregate_replicas
from daemon.spec import SpecDocument
from daemon.store.db import dumps, loads
from daemon.util import now_iso


async def create_suite(service: ExperimentService, *, tenant_id: str, spec_record: dict[str, Any], spec: SpecDocument,
                       n_replicas: int, inputs: dict[str, Any] | None, secrets: dict[str, str] | None) -> str:
    store = service.store
    suite_id = seeds.suite_id()
    now = now_iso()
    rows = [
        (seeds.job_id(), tenant_id, "suite", suite_id, None, 0, i, seeds.derive_seed(suite_id, 0, i), seeds.run_id(), "pending")
        for i in range(n_replicas)
    ]
    await store.execute(
        "INSERT INTO replica_suites (id, tenant_id, spec_id, spec_version, n_replicas, inputs, base_seed, secret_names, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
        (suite_id, tenant_id, spec_record["id"], spec_record["version"], n_replicas, dumps(inputs) if inputs is not None else None,
         suite_id, dumps(sorted(secrets or {})), now),
    )
    await store.executemany(
        "INSERT INTO scenario_jobs (id, tenant_id, group_kind, group_id, scenario_id, matrix_index, replica_index, seed, run_id, state)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    ctx = GroupContext("suite", suite_id, tenant_id, spec_record, spec, inputs, None, sorted(secrets or {}))
    service.remember(ctx, secrets)
    await service.enqueue_group(ctx)
    return suite_id


async def suite_body(service: ExperimentService, suite_id: str) -> dict[str, Any] | None:
    store = service.store
    row = await store.fetchone("SELECT * FROM replica_suites WHERE id = ?", (suite_id,))
    if row is None:
        return None
    jobs = await store.fetchall("SELECT * FROM scenario_jobs WHERE group_id = ? ORDER BY replica_index", (suite_id,))
    finished = [j for j in jobs if j["status"] is not None]
    strategy, min_rate = "majority", None
    try:
        ctx = await service.context(suite_id)
        strategy, min_rate = ctx.spec.scoring.replica_aggregation.strategy, ctx.spec.scoring.replica_aggregation.min_pass_rate
    except Exception:
        pass
    agg = aggregate_replicas([j["status"] for j in finished], strategy, min_rate)
    inputs = loads(row["inputs"], None)
    failed = agg["failed_runs"] + agg["errored_runs"]
    replicas = []
    for j in jobs:
        run = loads(j["result"], None) or {}
        replicas.append({
            "index": j["replica_index"],
            "seed": j["seed"],
            "run_id": j["run_id"],
            "status": j["status"] or j["state"],
            "score": j["score"],
            "duration_ms": run.get("duration_ms") if isinstance(run.get("duration_ms"), int) else j["wall_ms"],
            "error": j["error"],
            "reproducer": reproducer(row["spec_id"], row["spec_version"], j["seed"], inputs, None, run),
        })
    done = row["status"] != "running"
    return {
        "id": row["id"],
        "run_id": jobs[0]["run_id"] if jobs else None,
        "spec_id": row["spec_id"],
        "spec_version": row["spec_version"],
        "n_replicas": row["n_replicas"],
        "status": row["status"],
        "completed": len(finished),
        "passed": agg["passed_runs"],
        "failed": failed,
        "errored": agg["errored_runs"],
        "failure_rate": round(failed / len(finished), 6) if finished else None,
        "pass_rate": agg["pass_rate"],
        "pass_rate_ci": agg["pass_rate_ci"],
        "verdict": agg["verdict"] if done and finished else None,
        "strategy": strategy,
        "strategy_passed": agg["passed"] if done and finished else None,
        "seeds": [j["seed"] for j in jobs],
        "inputs": inputs or {},
        "replicas": replicas,
        "error": row["error"],
        "created_at": row["created_at"],
        "finished_at": row["finished_at"],
    }
