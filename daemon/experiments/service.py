"""Experiments and replica suites on the job engine (:mod:`daemon.runner.engine`): the experiment
kind, and the service both kinds share (persistence, recovery, the job function).

State lives in the store (``006_experiments.sql``, through ``daemon/store/experiments.py`` and
``daemon/store/jobs.py``); the engine only holds what is queued in this process. Every transition
of a job is committed before the next step, so a daemon killed with SIGKILL finds on start what the
engine's one recovery policy expects:

- ``queued`` jobs: submitted again, in their original order;
- ``running`` jobs (:func:`daemon.runner.engine.recover_interrupted`, the path every kind takes):
  retried once (with a fresh run id; the seed stays) and, when a retried job is found running again,
  errored with reason ``daemon_restart`` (``restart_attempts = 2``);
- groups whose jobs are all finished but whose status was not updated: finalized.

Nothing is lost and nothing runs twice to completion: a job's result is written once, with the
job's state moving to ``done`` in the same statement.

Secrets sent with an experiment or suite are held by the engine, in this process's memory only.
After a restart a job whose group had been sent a secret errors with a message naming it (its value
is gone); secrets the daemon resolves itself (``dashboard``, or a source resolvable in the daemon's
own environment) are left to the sandbox boot, which errors naming the secret when it is missing.

A group's kind (``experiment`` | ``suite``) is stored with its jobs (``scenario_jobs.group_kind``)
and names the plug-in that handles it: where its row is, what a job adds to the scenario it runs,
what a finished job publishes, how the group finishes (its ``done`` event, ``replica.completed``
webhook, summary), how it is described, and how it replays after a restart. This module asks the
plug-in; it never tests which kind it has.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from aiohttp import web

from daemon.datasets import experiments as dataset_experiments
from daemon.errors import Conflict, InvalidRequest
from daemon.events import EventBus
from daemon.experiments import seeds
from daemon.experiments.core import MAX_RUNS_PER_EXPERIMENT, failing_entries, recordings_source, validate_matrix, with_budget
from daemon.experiments.gate import overall_pass_k
from daemon.experiments.metrics import summary_for, trace_costs, trace_ids_by_run
from daemon.experiments.experiment_kind import ExperimentKind
from daemon.experiments.groups import COMPLETED_HOOKS_KEY, GroupContext, GroupFailed, GroupKindHooks, replica_event  # noqa: F401
from daemon.sandbox.engine import engine_failure
from daemon.experiments.retries import infrastructure_cause, retries_allowed
from daemon.experiments.results import (RUN_VERDICT, concurrency_used, time_budget, TERMINAL_EXPERIMENT, attach_records, experiment_record, run_cost, run_metrics,
                                        scenario_view, verdict_counts)
from daemon.experiments.suites import SuiteKind
from daemon.runner.request import RunOutcome, ScenarioRequest, ScenarioRunner
from daemon.runner.scenario import CANCEL_KEY, run_scenario
from daemon.runner.engine import RETRY_S, Job, Requeue, engine_of, missing_secrets, recover_interrupted
from daemon.spec import SpecDocument, load_spec
from daemon.webhooks import emit as emit_webhook
from daemon.store import datasets as dataset_store
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.store import runs as run_store
from daemon.store import specs as spec_store
from daemon.store.db import Store, dumps, loads
from daemon.util import new_id, now_iso
from daemon.appkeys import EVENTS, RUN_SCENARIO, SANDBOXES, STORE

log = logging.getLogger("svcd.experiments")

DEFAULT_SCENARIO_TIMEOUT_S = 30 * 60.0
TIMEOUT_GRACE_S = 30.0
OUTER_TIMEOUT_MARGIN_S = 60.0
SHUTDOWN_GRACE_S = 10.0
AT_CAPACITY_RETRY_S = RETRY_S  # the engine's one retry delay (a name tests may shorten)
ENGINE_WAIT_S = 120.0  # how long an infrastructure retry waits for the engine to answer again
INFRA_RETRY_S = 5.0  # first delay before an infrastructure error runs again, doubled each time (tests may shorten it)
TOPIC_RETENTION_S = 600.0


class ScenarioTimeout(Exception):
    def __init__(self, timeout_s: float, run: RunOutcome | None):
        super().__init__(f"timeout: the scenario exceeded resources.timeout ({_fmt_s(timeout_s)}), which covers setup, agent and scoring")
        self.run = run


def _outer_timeout_s(ctx: GroupContext) -> float:
    """The runner enforces resources.timeout itself (verdict error, reason scenario_timeout); this
    outer bound is the safety net, a little later so the runner's verdict wins."""
    return float(ctx.spec.resources.timeout or DEFAULT_SCENARIO_TIMEOUT_S) + OUTER_TIMEOUT_MARGIN_S


def _fmt_s(seconds: float) -> str:
    from daemon.spec import format_duration

    try:
        return format_duration(seconds)
    except ValueError:
        return f"{seconds}s"





class ExperimentService:
    def __init__(self, app: web.Application, limit: int | None = None):
        self.app = app
        self.engine = engine_of(app)
        self.kinds: dict[str, GroupKindHooks] = {"experiment": ExperimentKind(self), "suite": SuiteKind(self)}
        for kind in self.kinds.values():
            self.engine.register(kind)
        self.contexts: dict[str, GroupContext] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.cancelled: set[str] = set()
        self.shutting_down = False

    @property
    def scheduler(self):
        return self.engine.scheduler

    @property
    def limit(self) -> int:
        return self.engine.limit

    @property
    def secrets(self) -> dict[str, dict[str, str]]:
        """In-memory secrets of queued groups: the engine's one place for them."""
        return self.engine.secrets

    @property
    def store(self) -> Store:
        return self.app[STORE]

    @property
    def events(self) -> EventBus:
        return self.app[EVENTS]

    @property
    def run_scenario(self) -> ScenarioRunner:
        return self.app.get(RUN_SCENARIO) or run_scenario

    def lock(self, group_id: str) -> asyncio.Lock:
        return self.locks.setdefault(group_id, asyncio.Lock())

    # --- contexts --------------------------------------------------------------------------------

    async def context(self, group_id: str) -> GroupContext:
        ctx = self.contexts.get(group_id)
        if ctx is not None:
            return ctx
        kind = await self.kind_of(group_id)
        row, cap = await self.kinds[kind].group_row(group_id)
        if row is None:
            raise GroupFailed(f"{group_id} no longer exists")
        record = await spec_store.get(self.store, row["tenant_id"], row["spec_id"], row["spec_version"])
        if record is None:
            raise GroupFailed(f"spec '{row['spec_id']}' version {row['spec_version']} no longer exists")
        try:
            spec = load_spec(record["yaml"], f"{record['id']}.yaml")
        except Exception as exc:
            raise GroupFailed(f"spec '{row['spec_id']}' version {row['spec_version']} no longer loads: {str(exc).splitlines()[0]}")
        if "models_budget" in row.keys() and row["models_budget"]:
            spec = with_budget(spec, loads(row["models_budget"], None))
        ctx = GroupContext(kind, group_id, row["tenant_id"], record, spec, loads(row["inputs"], None), cap,
                           loads(row["secret_names"], []))
        if row["status"] in ("created", "running"):
            self.contexts[group_id] = ctx
        return ctx

    async def kind_of(self, group_id: str) -> str:
        """The group's kind as stored with its jobs (``scenario_jobs.group_kind``)."""
        ctx = self.contexts.get(group_id)
        if ctx is not None:
            return ctx.kind
        return await job_store.group_kind(self.store, group_id) or "experiment"

    def remember(self, ctx: GroupContext, secrets: dict[str, str] | None) -> None:
        self.contexts[ctx.id] = ctx
        self.engine.hold_secrets(ctx.id, secrets)

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self.engine.acquire("experiments")
        await self.recover()

    async def stop(self) -> None:
        self.shutting_down = True
        await self.engine.release("experiments")

    async def recover(self) -> None:
        """Re-queue what a previous daemon left behind (see the module docstring)."""
        now = now_iso()
        stale = 0
        for kind in self.kinds.values():
            stale += await recover_interrupted(self.store, kind)
        # A group cancelled (or failed) while some of its jobs were running: nothing to resume.
        for orphan in await job_store.orphan_groups(self.store):
            await job_store.cancel(self.store, orphan, now, ("queued",))
            await self._jobs_changed(orphan)
        groups = await experiment_store.running_groups(self.store)
        resumed = 0
        for group in groups:
            try:
                ctx = await self.context(group["id"])
            except GroupFailed as exc:
                await self.fail_group(group["id"], group["kind"], str(exc))
                continue
            queued = await job_store.queued_ids(self.store, ctx.id)
            await self.kinds[ctx.kind].replay(ctx)
            if queued:
                resumed += len(queued)
                self.engine.submit([self._job(ctx, job_id) for job_id in queued], cap=ctx.cap)
            else:
                await self.maybe_finish(ctx.id)
        if stale or resumed:
            log.info("recovered scenario jobs: %d were running, %d queued resumed", stale, resumed)

    def _job(self, ctx: GroupContext, job_id: str) -> Job:
        return Job(id=job_id, group_id=ctx.id, limit_key=ctx.limit_key, key_limit=ctx.key_limit, tenant=ctx.tenant_id, kind=ctx.kind)

    async def _jobs_changed(self, group_id: str) -> None:
        kind = self.kinds.get(await self.kind_of(group_id))
        if kind is not None:
            await kind.jobs_changed(group_id)

    # --- starting groups -------------------------------------------------------------------------

    async def create_suite(self, *, tenant_id: str, spec_record: dict[str, Any], spec: SpecDocument,
                           n_replicas: int, inputs: dict[str, Any] | None, secrets: dict[str, str] | None) -> str:
        """A replica suite of `n_replicas` runs of one spec, queued at once."""
        store = self.store
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
        self.remember(ctx, secrets)
        await self.enqueue_group(ctx)
        return suite_id

    # --- experiments -----------------------------------------------------------------------------

    async def create_experiment(self, *, tenant_id: str, spec_record: dict[str, Any], spec: SpecDocument,
                                name: str, secrets: dict[str, str] | None, replicas: int | None, concurrency: int | None,
                                matrix: list[dict[str, Any]] | None, inputs: dict[str, Any] | None, seed: str | None,
                                filter_failing_from: str | None, dataset_version: int | None = None,
                                replay_models_from: str | None = None,
                                models_budget: dict[str, Any] | None = None) -> dict[str, Any]:
        store = self.store
        if replay_models_from or models_budget:
            if spec.models is None:
                loc = "replay_models_from" if replay_models_from else "models_budget"
                raise InvalidRequest(f"{loc}: spec '{spec_record['id']}' has no models: block (no model gateway)",
                                     [{"loc": loc, "msg": "the spec declares no models"}])
            spec = with_budget(spec, models_budget)
        if replay_models_from:
            source = await recordings_source(store, tenant_id, replay_models_from, spec_record["id"])
            seed = seed or source["base_seed"]
        n_replicas = replicas or spec.parallelism.replicas
        if filter_failing_from:
            entries = await failing_entries(store, tenant_id, filter_failing_from, spec_record["id"])
        elif matrix is not None:
            entries = validate_matrix(matrix) or [{}]
        else:
            entries = spec.matrix_entries()
        dataset = None  # the dataset version the scenarios are records of
        if filter_failing_from:
            dataset = await dataset_store.experiment_dataset(store, filter_failing_from)
        elif spec.parallelism.dataset is not None:
            ref = spec.parallelism.dataset.model_copy(update={"version": dataset_version}) if dataset_version else spec.parallelism.dataset
            entries, dataset = await dataset_experiments.expand(store, tenant_id, ref, entries)
        if dataset_version and spec.parallelism.dataset is None:
            raise InvalidRequest("dataset_version: the spec has no parallelism.dataset", [{"loc": "dataset_version", "msg": "no dataset in the spec"}])
        total = n_replicas * len(entries)
        if total > MAX_RUNS_PER_EXPERIMENT:
            raise InvalidRequest(
                f"replicas: {n_replicas} replicas x {len(entries)} matrix entries = {total} runs, more than {MAX_RUNS_PER_EXPERIMENT} per experiment",
                [{"loc": "replicas", "msg": f"total runs above {MAX_RUNS_PER_EXPERIMENT}"}],
            )
        experiment_id = seeds.experiment_id()
        base_seed = seed or experiment_id
        now = now_iso()
        async with store.transaction() as tx:
            await experiment_store.insert(
                tx, experiment_id=experiment_id, tenant_id=tenant_id, name=name, spec_record=spec_record, replicas=n_replicas,
                concurrency=concurrency, matrix=entries, inputs=inputs, base_seed=base_seed, filter_failing_from=filter_failing_from,
                secret_names=sorted(secrets or {}), total_runs=total, now=now,
            )
            scenario_rows, job_rows = [], []
            for m, entry in enumerate(entries):
                scenario_id = seeds.scenario_id()
                scenario_rows.append((scenario_id, experiment_id, tenant_id, m, dumps(entry), n_replicas, "created"))
                for r in range(n_replicas):
                    job_rows.append((seeds.job_id(), tenant_id, "experiment", experiment_id, scenario_id, m, r,
                                     seeds.derive_seed(base_seed, m, r), seeds.run_id(), "pending"))
            await experiment_store.insert_scenarios(tx, scenario_rows)
            await job_store.insert_many(tx, job_rows)
            if replay_models_from or models_budget:
                await experiment_store.set_models(tx, experiment_id, replay_models_from, models_budget)
            if dataset is not None:
                await dataset_store.link_experiment(tx, experiment_id, dataset)
        ctx = GroupContext("experiment", experiment_id, tenant_id, spec_record, spec, inputs, concurrency, sorted(secrets or {}))
        self.remember(ctx, secrets)
        return dict(await experiment_store.get(store, experiment_id))


    async def run_experiment(self, row: Any, secrets: dict[str, str] | None) -> dict[str, Any]:
        store = self.store
        if row["status"] != "created":
            verb = "is already running" if row["status"] == "running" else f"is {row['status']}"
            raise Conflict(f"experiment '{row['id']}' {verb}; create a new experiment to run again", row["status"])
        self.contexts.pop(row["id"], None)  # reload: the spec version may have gone since creation
        try:
            ctx = await self.context(row["id"])
        except GroupFailed as exc:  # e.g. its spec version was deleted: the experiment cannot proceed
            await self.fail_group(row["id"], "experiment", str(exc))
            raise Conflict(f"experiment '{row['id']}' cannot run and is now failed: {exc}", "failed")
        count = await experiment_store.start(store, row["id"], now_iso())
        if not count:
            fresh = await experiment_store.get(store, row["id"])
            raise Conflict(f"experiment '{row['id']}' is {fresh['status']}", fresh["status"])
        if secrets:
            held = dict(self.secrets.get(row["id"], {}))
            held.update(secrets)
            self.secrets[row["id"]] = held
            names = sorted(set(ctx.secret_names) | set(secrets))
            ctx.secret_names = names
            await experiment_store.set_secret_names(store, row["id"], names)
        self.events.publish(f"experiment:{row['id']}", {"type": "status", "experiment_id": row["id"], "status": "running"})
        await self.enqueue_group(ctx)
        return {"id": row["id"], "status": "running", "total_runs": row["total_runs"]}


    async def cancel_experiment(self, row: Any) -> None:
        if row["status"] in TERMINAL_EXPERIMENT:
            raise Conflict(f"experiment '{row['id']}' is already {row['status']}", row["status"])
        count = await experiment_store.cancel(self.store, row["id"], now_iso())
        if not count:
            fresh = await experiment_store.get(self.store, row["id"])
            raise Conflict(f"experiment '{row['id']}' is already {fresh['status']}", fresh["status"])
        self.events.publish(f"experiment:{row['id']}", {"type": "status", "experiment_id": row["id"], "status": "cancelled"})
        await self.cancel_group(row["id"])


    async def aggregation_of(self, row: Any) -> tuple[str, float | None, float | None]:
        try:
            ctx = await self.context(row["id"]) if row["status"] not in TERMINAL_EXPERIMENT else None
        except Exception:
            ctx = None
        spec = ctx.spec if ctx is not None else None
        if spec is None:
            from daemon.spec import load_spec
            from daemon.store import specs as spec_store

            record = await spec_store.get(self.store, row["tenant_id"], row["spec_id"], row["spec_version"])
            if record is not None:
                try:
                    spec = load_spec(record["yaml"], f"{record['id']}.yaml")
                except Exception:
                    spec = None
        if spec is None:
            return "majority", None, None
        agg = spec.scoring.replica_aggregation
        return agg.strategy, agg.min_pass_rate, spec.scoring.pass_threshold


    async def scenario_views(self, row: Any, scenario_rows: list[Any], include_runs: bool = True) -> list[dict[str, Any]]:
        store = self.store
        strategy, min_rate, _ = await self.aggregation_of(row)
        ids = [s["id"] for s in scenario_rows]
        jobs_by_scenario: dict[str, list[Any]] = {i: [] for i in ids}
        if ids:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                for job in await job_store.of_scenarios(store, list(chunk)):
                    jobs_by_scenario[job["scenario_id"]].append(job)
        traces = await trace_ids_by_run(store, row["tenant_id"], row["id"])
        costs = await trace_costs(store, row["tenant_id"], row["id"])
        inputs = loads(row["inputs"], None)
        dataset = await dataset_store.experiment_dataset(store, row["id"])
        views = [
            scenario_view(s, jobs_by_scenario[s["id"]], spec_id=row["spec_id"], spec_version=row["spec_version"], inputs=inputs,
                          strategy=strategy, min_pass_rate=min_rate, experiment_status=row["status"], trace_ids=traces,
                          trace_costs=costs, include_runs=include_runs, dataset=dataset)
            for s in scenario_rows
        ]
        record_ids = [v["matrix_entry"]["record_id"] for v in views if isinstance(v["matrix_entry"].get("record_id"), str)]
        attach_records(views, dataset, await dataset_store.records_by_id(store, record_ids) if dataset and record_ids else {})
        return views


    async def run_results(self, row: Any) -> dict[str, Any]:
        """RunResults: the experiment, every scenario with its replicas, and the metrics block."""
        store = self.store
        scenario_rows = await experiment_store.scenarios(store, row["id"])
        scenarios = await self.scenario_views(row, scenario_rows)
        jobs = await job_store.of_group(store, row["id"])
        costs = await trace_costs(store, row["tenant_id"], row["id"])
        base = run_metrics(jobs, costs)
        # Always fresh (trace events may arrive after the last run finished); the copy cached on the
        # row at completion serves lists and history.
        summary = await summary_for(store, row["tenant_id"], row["id"], jobs, costs)
        strategy, min_rate, threshold = await self.aggregation_of(row)
        completed = base["runs"]
        record = experiment_record(row, completed)
        record.pop("summary", None)
        verdicts = verdict_counts(scenarios)
        pass_at, pass_hat = overall_pass_k(scenarios)
        return {
            "experiment_id": row["id"],
            **record,
            "dataset": await dataset_store.experiment_dataset(store, row["id"]),
            "aggregation": {"strategy": strategy, "min_pass_rate": min_rate, "pass_threshold": threshold},
            "scenarios": scenarios,
            "metrics": {
                **summary,
                "verdicts": verdicts,
                "scenarios": len(scenarios),
                "scenarios_passed": sum(1 for s in scenarios if s["passed"]),
                "all_passed": bool(scenarios) and all(s["verdict"] == "pass" for s in scenarios),
                "pass_at_k": pass_at, "pass_hat_k": pass_hat,
                "retried_runs": sum(s["retried_runs"] for s in scenarios),
                "time_budget_ms": time_budget(jobs),
                "concurrency": concurrency_used(jobs),
            },
        }

    async def enqueue_group(self, ctx: GroupContext) -> int:
        """Move the group's pending jobs to queued and hand them to the scheduler."""
        now = now_iso()
        await job_store.queue_pending(self.store, ctx.id, now)
        rows = await job_store.queued_ids(self.store, ctx.id)
        await self.kinds[ctx.kind].group_queued(ctx.id)
        if rows:
            self.engine.submit([self._job(ctx, job_id) for job_id in rows], cap=ctx.cap)
        else:
            await self.maybe_finish(ctx.id)
        return len(rows)

    async def cancel_group(self, group_id: str) -> None:
        """Queued jobs are dropped; running ones are asked to stop (their results are kept when
        they finish anyway)."""
        self.cancelled.add(group_id)
        self.scheduler.cancel_group(group_id)
        await job_store.cancel(self.store, group_id, now_iso(), ("pending", "queued"))
        await self._jobs_changed(group_id)
        await self.maybe_finish(group_id)

    async def fail_group(self, group_id: str, kind: str, message: str) -> None:
        log.warning("%s %s failed: %s", kind, group_id, message)
        self.scheduler.cancel_group(group_id)
        now = now_iso()
        await job_store.cancel(self.store, group_id, now, ("pending", "queued", "running"), error=message)
        plugin = self.kinds[kind]
        await plugin.group_failed(group_id, message, now)
        await self._jobs_changed(group_id)
        await self.maybe_finish(group_id)

    # --- the job function ------------------------------------------------------------------------

    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any:
        """The engine's job function for both kinds: run one replica and record its result."""
        try:
            ctx = await self.context(job.group_id)
        except GroupFailed as exc:
            await self.fail_group(job.group_id, job.kind or await self.kind_of(job.group_id), str(exc))
            return None
        row = await job_store.get(self.store, job.id)
        if row is None or row["state"] != "queued":
            return None
        await job_store.mark_running(self.store, job.id, now_iso(), self.engine.limit)
        plugin = self.kinds[ctx.kind]
        await plugin.job_started(ctx, row)

        missing = self._lost_secret(ctx)
        if missing:
            await self._complete(ctx, row, status="errored", error=missing, run=None, wall_ms=0)
            return None

        started = time.perf_counter()
        matrix_entry = await plugin.matrix_entry(row)
        try:
            extra = await plugin.scenario_kwargs(ctx, matrix_entry)
        except LookupError as exc:
            await self._complete(ctx, row, status="errored", error=str(exc), run=None, wall_ms=0)
            return None
        pins = None
        models = await experiment_store.models_of(self.store, ctx.id)  # None for a group that is no experiment
        if models is not None and models["replay_models_from"]:
            source = models["replay_models_from"]
            recording = await experiment_store.model_recording(self.store, source, row["matrix_index"], row["replica_index"])
            if recording is None:
                await self._complete(ctx, row, status="errored", run=None, wall_ms=0, error=(
                    f"replay_models_from: experiment '{source}' has no model recording for matrix entry "
                    f"{row['matrix_index']} replica {row['replica_index']}"))
                return None
            pins = {"model_recording": recording}
        request = ScenarioRequest(
            tenant_id=ctx.tenant_id,
            spec_record=ctx.spec_record,
            spec=ctx.spec,
            run_id=row["run_id"],
            seed=row["seed"],
            inputs=ctx.inputs,
            matrix_entry=matrix_entry or None,
            secrets=self.engine.secrets_of(ctx.id) or None,
            experiment_id=None,
            scenario_id=row["scenario_id"],
            cancel=cancel,
            pins=pins,
            defer_webhook=True,  # sent below, once the run's final status is decided
            queued_at=row["queued_at"],
        )
        request = dataclasses.replace(request, **extra)
        status: str
        error: str | None = None
        outcome: RunOutcome | None = None
        engine_exc = False
        try:
            outcome = await self._call_runner(request, _outer_timeout_s(ctx), cancel)
        except ScenarioTimeout as exc:
            outcome, status, error = exc.run, "errored", str(exc)
        except asyncio.CancelledError:
            if self.shutting_down:
                await self._put_back(job.id)
            raise
        except Exception as exc:
            if _is_at_capacity(exc):
                await self._put_back(job.id)
                return Requeue(AT_CAPACITY_RETRY_S, "at capacity")
            log.exception("scenario job %s errored", job.id)
            status, error = "errored", f"{type(exc).__name__}: {exc}"
            engine_exc = engine_failure(exc)
        else:
            status = outcome.status if outcome.status in RUN_VERDICT else "errored"
            error = outcome.error_text() if status == "errored" else None
        run = outcome.body() if outcome is not None else None
        stopped_by_us = cancel.is_set() and status == "errored" and (outcome is None or outcome.cancelled)
        if self.shutting_down and stopped_by_us:
            # Interrupted by our own shutdown: it runs again at the next start, attempt not counted.
            await self._put_back(job.id)
            return None
        wall_ms = int((time.perf_counter() - started) * 1000)
        if stopped_by_us and job.group_id in self.cancelled:
            # The experiment was cancelled under it: the run does not count as an errored replica.
            await self._run_completed(ctx, run)
            await self._complete(ctx, row, status=None, error=error or "cancelled", run=run, wall_ms=wall_ms, state="cancelled")
            return None
        lost = status == "failed" and outcome is not None and outcome.agent_engine_lost
        cause = infrastructure_cause(status, error, outcome, lost, engine_exc) if not cancel.is_set() else None
        if lost and cause:
            # the final classification: the runner stored `failed`, the engine's loss makes it ours
            status, error = "errored", cause
            await run_store.update(self.store, row["run_id"], status="errored", verdict="error", reason="infrastructure_error")
            if run is not None:
                run = {**run, "status": "errored", "verdict": "error", "reason": "infrastructure_error"}
        await self._run_completed(ctx, run)
        retried = loads(row["previous_run_ids"], [])
        if cause and len(retried) < retries_allowed(ctx.spec):
            # The infrastructure's error, not the agent's: the same replica (same seed) again, in a
            # new sandbox under a new run id; this attempt stays in previous_run_ids.
            log.warning("replica %s of %s: infrastructure error (%s); retry %d", row["run_id"], ctx.id, cause, len(retried) + 1)
            await job_store.retry(self.store, row["id"], new_id("run_"), retried + [row["run_id"]], now_iso())
            await self._jobs_changed(ctx.id)
            await self._engine_back(cancel)
            return Requeue(INFRA_RETRY_S * 2 ** len(retried), f"infrastructure error: {cause}")
        await self._complete(ctx, row, status=status, error=error, run=run, wall_ms=wall_ms)
        return None

    async def _engine_back(self, cancel: asyncio.Event) -> None:
        """Until the sandbox engine answers again (at most ENGINE_WAIT_S), so that a retry is not
        spent inside the same outage (an engine restart takes seconds to tens of seconds)."""
        driver = getattr(self.app.get(SANDBOXES), "driver", None)
        deadline = time.monotonic() + ENGINE_WAIT_S
        while driver is not None and time.monotonic() < deadline and not cancel.is_set():
            try:
                await asyncio.to_thread(lambda: driver.api.ping())
                return
            except Exception:  # noqa: BLE001  (any failure: the engine is not back yet)
                await asyncio.sleep(1.0)

    async def _call_runner(self, request: ScenarioRequest, timeout_s: float, cancel: asyncio.Event) -> RunOutcome:
        """The run's outcome once the runner answered within `timeout_s`; `cancel` reachable by its run id
        meanwhile (POST /v1/runs/{id}/cancel)."""
        cancels: dict[str, asyncio.Event] = self.app.get(CANCEL_KEY, {})
        cancels[request.run_id] = cancel
        task = asyncio.ensure_future(self.run_scenario(self.app, request))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout_s)
            if done:
                return task.result()
            cancel.set()  # ask the runner to stop and tear its sandbox down
            done, _ = await asyncio.wait({task}, timeout=TIMEOUT_GRACE_S)
            run = None
            if done and not task.cancelled() and task.exception() is None:
                run = task.result()
            elif not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            raise ScenarioTimeout(timeout_s - OUTER_TIMEOUT_MARGIN_S, run)
        except asyncio.CancelledError:
            cancel.set()
            if not task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(task), SHUTDOWN_GRACE_S / 2)
                except BaseException:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            raise
        finally:
            if cancels.get(request.run_id) is cancel:
                cancels.pop(request.run_id, None)

    def _lost_secret(self, ctx: GroupContext) -> str | None:
        """A secret that was sent with the group but is no longer in memory (daemon restart)."""
        for name in missing_secrets(self.engine, ctx.id, ctx.secret_names)[:1]:
            source = ctx.spec.secrets.get(name, "request")
            return (f"secret '{name}' (source {source}) is missing: it was sent with {ctx.id} and secrets are held in"
                    " memory only, so it was lost when the daemon restarted")
        return None

    async def _put_back(self, job_id: str) -> None:
        """The job did not really run (shutdown, at capacity): queued again, attempt not counted."""
        await job_store.put_back(self.store, job_id)

    async def _run_completed(self, ctx: GroupContext, run: dict | None) -> None:
        """`run.completed`, sent once the run's status is final (the runner defers it to here)."""
        if isinstance(run, dict) and run.get("status") in ("passed", "failed", "errored"):
            from daemon.webhooks import emit

            await emit(self.app, ctx.tenant_id, "run.completed", run)

    async def _complete(self, ctx: GroupContext, row: Any, *, status: str | None, error: str | None, run: dict | None,
                        wall_ms: int | None, state: str = "done") -> None:
        changed = await self._finish_job(row["id"], status=status, error=error, run=run, wall_ms=wall_ms, state=state)
        if not changed:
            return
        await self.kinds[ctx.kind].job_finished(ctx.id, row["id"])
        await self.maybe_finish(ctx.id)

    async def _finish_job(self, job_id: str, *, status: str | None, error: str | None, run: dict | None, wall_ms: int | None,
                          state: str = "done") -> bool:
        score = run.get("score") if isinstance(run, dict) else None
        cost = run_cost(run)
        return await job_store.finish(self.store, job_id, state=state, status=status,
                                      score=score if isinstance(score, (int, float)) else None, error=error,
                                      result=_trim_run(run), wall_ms=wall_ms, cost_usd=cost, now=now_iso())

    # --- scenario rows and completion -------------------------------------------------------------

    async def refresh_scenario(self, scenario_id: str) -> None:
        await self.kinds["experiment"].refresh_scenario(scenario_id)

    async def maybe_finish(self, group_id: str) -> None:
        async with self.lock(group_id):
            if await job_store.count(self.store, group_id, ("queued", "running")):  # the store is the truth: a finishing job is already `done` there
                return
            kind = self.kinds[await self.kind_of(group_id)]
            done = await kind.finish(group_id)
            if done is None:
                return
            topic = kind.topic(group_id)
            self.events.publish(topic, done.event)
            self._close_topic(topic)
            self._forget(group_id)
            await kind.closed(group_id, done)

    def _close_topic(self, topic: str) -> None:
        """Close a stream topic; its history stays for late subscribers for a while, then the
        stream is rebuilt from the store."""
        self.events.close(topic)
        try:
            asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, self.events.forget, topic)
        except RuntimeError:
            pass

    async def emit_webhook(self, tenant_id: str, event: str, body: dict[str, Any]) -> None:
        await emit_webhook(self.app, tenant_id, event, body)

    def _forget(self, group_id: str) -> None:
        self.engine.drop_secrets(group_id)
        self.contexts.pop(group_id, None)
        self.cancelled.discard(group_id)
        self.locks.pop(group_id, None)


# --- helpers ----------------------------------------------------------------------------------------


def _trim_run(run: dict | None) -> dict | None:
    if not isinstance(run, dict):
        return None
    return {k: v for k, v in run.items() if k not in ("trajectory", "trace", "events", "audit")}


def _is_at_capacity(exc: Exception) -> bool:
    from daemon.errors import AtCapacity

    return isinstance(exc, AtCapacity) or type(exc).__name__ in ("AtCapacity", "SandboxAtCapacity")


SERVICE_KEY = web.AppKey("experiment_service", ExperimentService)


def get_service(app: web.Application) -> ExperimentService:
    return app[SERVICE_KEY]
