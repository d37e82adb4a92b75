"""Replica suites: n runs of one spec with one seed each, aggregated into a flakiness verdict.

Status: ``running`` on creation (202) -> ``complete`` when every replica finished, ``errored`` when
the suite itself could not proceed (its spec version vanished). ``passed`` counts passed replicas,
``failed`` every replica that did not pass (failed or errored; ``errored`` is the subset that
errored), ``failure_rate`` = failed / finished.
"""
from __future__ import annotations

import asyncio
from typing import Any

from daemon.experiments import seeds
from daemon.experiments.groups import GroupContext, replica_event
from daemon.experiments.results import reproducer
from daemon.experiments.stats import aggregate_replicas
from daemon.runner.engine import GroupKind, Job
from daemon.spec import SpecDocument
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.store.db import loads
from daemon.util import now_iso

# ``service`` below is the ExperimentService (daemon.experiments.service imports this module, not
# the other way round): it offers store, events, context(), remember(), enqueue_group().
ExperimentService = Any


class SuiteKind(GroupKind):
    """A replica suite: n jobs of one spec, one seed each; ``replica.completed`` when done."""

    name = "suite"

    def __init__(self, service: ExperimentService):
        self.service = service

    def topic(self, group_id: str) -> str:
        return f"replicas:{group_id}"

    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any:
        return await self.service._run_job(job, cancel)

    async def group_row(self, group_id: str) -> tuple[Any, int | None]:
        """The suite's row; a suite has no cap of its own."""
        return await experiment_store.get_suite(self.service.store, group_id), None

    async def group_queued(self, group_id: str) -> None:
        return None

    async def scenario_kwargs(self, ctx: GroupContext, matrix_entry: dict[str, Any] | None) -> dict[str, Any]:
        return {}

    async def job_started(self, ctx: GroupContext, row: Any) -> None:
        return None

    async def matrix_entry(self, row: Any) -> dict[str, Any] | None:
        return None

    async def job_finished(self, group_id: str, job_id: str) -> None:
        fresh = await job_store.get(self.service.store, job_id)
        self.service.events.publish(self.topic(group_id), replica_event(fresh))

    async def group_failed(self, group_id: str, message: str, now: str) -> None:
        await experiment_store.fail_suite(self.service.store, group_id, message, now)

    async def group_finished(self, group_id: str) -> None:
        service = self.service
        row = await experiment_store.get_suite(service.store, group_id)
        if row is None:
            return
        topic = self.topic(group_id)
        if row["status"] == "running":
            await experiment_store.complete_suite(service.store, group_id, now_iso())
        elif topic in service.events.closed:
            return
        body = await self.describe(group_id)
        service.events.publish(topic, {"type": "done", "suite": body})
        service._close_topic(topic)
        service._forget(group_id)
        await service.emit_webhook(row["tenant_id"], "replica.completed", body)

    async def describe(self, group_id: str) -> dict[str, Any] | None:
        return await suite_body(self.service, group_id)

    async def replay(self, ctx: GroupContext) -> None:
        """After a restart, replay finished replicas into the suite's topic so a stream
        subscriber still sees every completion."""
        for row in await job_store.of_group(self.service.store, ctx.id, "done_only"):
            self.service.events.publish(self.topic(ctx.id), replica_event(row))


async def create_suite(service: ExperimentService, *, tenant_id: str, spec_record: dict[str, Any], spec: SpecDocument,
                       n_replicas: int, inputs: dict[str, Any] | None, secrets: dict[str, str] | None) -> str:
    store = service.store
    suite_id = seeds.suite_id()
    now = now_iso()
    rows = [
        (seeds.job_id(), tenant_id, "suite", suite_id, None, 0, i, seeds.derive_seed(suite_id, 0, i), seeds.run_id(), "pending")
        for i in range(n_replicas)
    ]
    await experiment_store.insert_suite(store, suite_id=suite_id, tenant_id=tenant_id, spec_record=spec_record, n_replicas=n_replicas,
                                        inputs=inputs, base_seed=suite_id, secret_names=sorted(secrets or {}), now=now)
    await job_store.insert_many(store, rows)
    ctx = GroupContext("suite", suite_id, tenant_id, spec_record, spec, inputs, None, sorted(secrets or {}))
    service.remember(ctx, secrets)
    await service.enqueue_group(ctx)
    return suite_id


async def suite_body(service: ExperimentService, suite_id: str) -> dict[str, Any] | None:
    store = service.store
    row = await experiment_store.get_suite(store, suite_id)
    if row is None:
        return None
    jobs = await job_store.of_group(store, suite_id, "replica")
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
