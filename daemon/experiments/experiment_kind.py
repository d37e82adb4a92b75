"""The experiment kind of the job engine: an experiment's jobs are the replicas of its scenarios
(one per matrix entry). Its hooks keep the scenario rows in step with their jobs, publish the
``experiment:<id>`` stream (run_started, run, scenario, done) and, when the experiment finishes,
store its summary and call the experiment-completed hooks."""
from __future__ import annotations

import logging
from typing import Any

from daemon.datasets import experiments as dataset_experiments
from daemon.experiments.groups import COMPLETED_HOOKS_KEY, GroupContext, GroupDone, GroupFailed, GroupKindHooks, replica_event
from daemon.experiments.results import experiment_record
from daemon.runner.engine import engine_of
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.store.db import loads
from daemon.util import now_iso

log = logging.getLogger("svcd.experiments")


class ExperimentKind(GroupKindHooks):
    """An experiment: jobs are the replicas of its scenarios (matrix entries)."""

    name = "experiment"

    def topic(self, group_id: str) -> str:
        return f"experiment:{group_id}"

    async def group_row(self, group_id: str) -> tuple[Any, int | None]:
        """The experiment's row and its concurrency cap."""
        row = await experiment_store.get(self.service.store, group_id)
        return row, row["concurrency"] if row is not None else None

    async def group_queued(self, group_id: str) -> None:
        await experiment_store.set_scenarios_status(self.service.store, group_id, "queued")  # the scenario rows follow their jobs

    async def scenario_kwargs(self, ctx: GroupContext, matrix_entry: dict[str, Any] | None) -> dict[str, Any]:
        """The runner arguments an experiment adds: its id and, for a dataset scenario, the record (its
        input fills the task, its expected the checks). LookupError when the record is gone."""
        extra: dict[str, Any] = {"experiment_id": ctx.id}
        record = await dataset_experiments.scenario_record(self.service.store, ctx.id, matrix_entry)
        if record is not None:
            extra["inputs"] = {**(ctx.inputs or {}), **dataset_experiments.record_inputs(record)}
            extra["dataset_record"] = dataset_experiments.runner_record(record)
        return extra

    async def job_started(self, ctx: GroupContext, row: Any) -> None:
        service = self.service
        if row["scenario_id"]:
            await experiment_store.scenario_started(service.store, row["scenario_id"])
        service.events.publish(self.topic(ctx.id), {"type": "run_started", "job_id": row["id"], "scenario_id": row["scenario_id"],
                                                    "replica_index": row["replica_index"], "run_id": row["run_id"], "seed": row["seed"],
                                                    "concurrency": engine_of(service.app).limit})

    async def matrix_entry(self, row: Any) -> dict[str, Any] | None:
        return loads(await experiment_store.scenario_matrix_entry(self.service.store, row["scenario_id"]), {}) or None

    async def job_finished(self, group_id: str, job_id: str) -> None:
        service = self.service
        fresh = await job_store.get(service.store, job_id)
        event = replica_event(fresh)
        service.events.publish(self.topic(group_id), {"type": "run", "experiment_id": group_id, "scenario_id": fresh["scenario_id"],
                                                      **{k: v for k, v in event.items() if k != "type"}, "error": fresh["error"]})
        await self.refresh_scenario(fresh["scenario_id"])

    async def jobs_changed(self, group_id: str) -> None:
        """Queued jobs were dropped or cancelled: the scenario rows follow."""
        for scenario_id in await experiment_store.scenario_ids(self.service.store, group_id):
            await self.refresh_scenario(scenario_id)

    async def group_failed(self, group_id: str, message: str, now: str) -> None:
        await experiment_store.fail(self.service.store, group_id, message, now)

    async def describe(self, group_id: str) -> dict[str, Any] | None:
        bodies = await self.describe_many([group_id])
        return bodies[0] if bodies else None

    async def describe_many(self, group_ids: list[str]) -> list[dict[str, Any]]:
        rows = await experiment_store.with_progress(self.service.store, group_ids)
        return [experiment_record(row, row["completed_runs"]) for row in rows]

    async def replay(self, ctx: GroupContext) -> None:
        await self.jobs_changed(ctx.id)

    # --- scenario rows and completion -----------------------------------------------------------

    async def refresh_scenario(self, scenario_id: str) -> None:
        """Recompute a scenario row's status/verdict from its jobs (used by the scenarios filter)."""
        from daemon.experiments.results import status_of
        from daemon.experiments.stats import aggregate_replicas

        scn = await experiment_store.scenario_with_experiment(self.service.store, scenario_id)
        if scn is None:
            return
        # counts per state and status, not the jobs themselves: a finished replica of a scenario with
        # a thousand replicas costs what one of three does
        tally = await job_store.tally_of_scenario(self.service.store, scenario_id)
        strategy, min_rate = "majority", None
        try:
            agg = (await self.service.context(scn["eid"])).spec.scoring.replica_aggregation
            strategy, min_rate = agg.strategy, agg.min_pass_rate
        except GroupFailed:
            pass
        statuses = [t["status"] for t in tally if t["status"] is not None for _ in range(t["n"])]
        aggregated = aggregate_replicas(statuses, strategy, min_rate)
        status = status_of({t["state"] for t in tally}, len(statuses), sum(t["n"] for t in tally), scn["experiment_status"],
                           aggregated)
        done = status in ("pass", "fail", "flaky", "error")
        scored = sum(t["scored"] for t in tally if t["status"] is not None)
        score_sum = sum(t["score_sum"] or 0.0 for t in tally if t["status"] is not None)
        old = scn["status"]
        await experiment_store.update_scenario(
            self.service.store, scenario_id, status=status, verdict=aggregated["verdict"] if done else None,
            passed=(1 if aggregated["passed"] else 0) if done else None, score=score_sum / scored if scored else None,
            finished_at=(scn["finished_at"] or now_iso()) if done or status == "cancelled" else None,
        )
        if old != status:
            self.service.events.publish(f"experiment:{scn['eid']}", {"type": "scenario", "experiment_id": scn["eid"], "scenario_id": scenario_id,
                                                             "status": status, "verdict": aggregated["verdict"] if done else None})

    async def finish(self, experiment_id: str) -> GroupDone | None:
        from daemon.experiments.metrics import summary_for

        row = await experiment_store.get(self.service.store, experiment_id)
        if row is None or row["status"] == "created":
            return None
        if row["status"] == "running" and await job_store.count(self.service.store, experiment_id, ("pending",)):
            return None
        if row["status"] == "running":
            await experiment_store.complete(self.service.store, experiment_id, now_iso())
        elif row["summary"] is not None and self.topic(experiment_id) in self.service.events.closed:
            return None
        try:
            summary = await summary_for(self.service.store, row["tenant_id"], experiment_id)
        except Exception:
            log.exception("metrics summary of %s failed", experiment_id)
            summary = None
        if summary is not None:
            await experiment_store.set_summary(self.service.store, experiment_id, summary)
        final = await experiment_store.get(self.service.store, experiment_id)
        return GroupDone(row["tenant_id"], {"type": "done", "experiment_id": experiment_id, "status": final["status"],
                                            "finished_at": final["finished_at"], "total_runs": final["total_runs"], "summary": summary})

    async def closed(self, experiment_id: str, done: GroupDone) -> None:
        """The experiment-completed hooks (scoring, alerts), each on its own: one failing does not stop the rest."""
        for hook in list(self.service.app.get(COMPLETED_HOOKS_KEY, [])):
            try:
                await hook(self.service.app, experiment_id, done.event["status"])
            except Exception:
                log.exception("experiment-completed hook %r failed for %s", hook, experiment_id)
