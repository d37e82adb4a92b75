"""Replica suites: n runs of one spec with one seed each, aggregated into a flakiness verdict.

Status: ``running`` on creation (202) -> ``complete`` when every replica finished, ``errored`` when
the suite itself could not proceed (its spec version vanished). ``passed`` counts passed replicas,
``failed`` every replica that did not pass (failed or errored; ``errored`` is the subset that
errored), ``failure_rate`` = failed / finished.
"""
from __future__ import annotations

from typing import Any

from daemon.experiments.groups import GroupContext, GroupDone, GroupHost, GroupKindHooks, replica_event
from daemon.experiments.results import reproducer
from daemon.experiments.stats import aggregate_replicas
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.store.db import loads
from daemon.util import now_iso

class SuiteKind(GroupKindHooks):
    """A replica suite: n jobs of one spec, one seed each; ``replica.completed`` when done."""

    name = "suite"

    def topic(self, group_id: str) -> str:
        return f"replicas:{group_id}"

    async def group_row(self, group_id: str) -> tuple[Any, int | None]:
        """The suite's row; a suite has no cap of its own."""
        return await experiment_store.get_suite(self.service.store, group_id), None

    async def job_finished(self, group_id: str, job_id: str) -> None:
        fresh = await job_store.get(self.service.store, job_id)
        self.service.events.publish(self.topic(group_id), replica_event(fresh))

    async def group_failed(self, group_id: str, message: str, now: str) -> None:
        await experiment_store.fail_suite(self.service.store, group_id, message, now)

    async def finish(self, group_id: str) -> GroupDone | None:
        service = self.service
        row = await experiment_store.get_suite(service.store, group_id)
        if row is None:
            return None
        if row["status"] == "running":
            await experiment_store.complete_suite(service.store, group_id, now_iso())
        elif self.topic(group_id) in service.events.closed:
            return None
        return GroupDone(row["tenant_id"], {"type": "done", "suite": await self.describe(group_id)})

    async def closed(self, group_id: str, done: GroupDone) -> None:
        await self.service.emit_webhook(done.tenant_id, "replica.completed", done.event["suite"])

    async def describe(self, group_id: str) -> dict[str, Any] | None:
        return await suite_body(self.service, group_id)

    async def replay(self, ctx: GroupContext) -> None:
        """After a restart, replay finished replicas into the suite's topic so a stream
        subscriber still sees every completion."""
        for row in await job_store.of_group(self.service.store, ctx.id, "done_only"):
            self.service.events.publish(self.topic(ctx.id), replica_event(row))


async def suite_body(service: GroupHost, suite_id: str) -> dict[str, Any] | None:
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
