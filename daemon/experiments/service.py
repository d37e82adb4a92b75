"""Experiments and replica suites on top of the scheduler.

State lives in the store (``006_experiments.sql``); the scheduler only holds what is queued in
this process. Every transition of a job is committed before the next step, so a daemon killed
with SIGKILL finds on start:

- ``queued`` jobs: submitted again, in their original order;
- ``running`` jobs: retried once (with a fresh run id; the seed stays) and, when a retried job is
  found running again, errored with reason ``daemon_restart``;
- groups whose jobs are all finished but whose status was not updated: finalized.

Nothing is lost and nothing runs twice to completion: a job's result is written once, with the
job's state moving to ``done`` in the same statement.

Secrets sent with an experiment or suite are kept in this process's memory only. After a restart
a job whose group had been sent a secret errors with a message naming it (its value is gone);
secrets the daemon resolves itself (``dashboard``, or a source resolvable in the daemon's own
environment) are left to the sandbox boot, which errors naming the secret when it is missing.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from aiohttp import web

from daemon.experiments import seeds
from daemon.experiments.results import RUN_VERDICT, run_cost
from daemon.experiments.scheduler import Job, Requeue, Scheduler, default_global_limit
from daemon.spec import SpecDocument, load_spec
from daemon.store import specs as spec_store
from daemon.store.db import Store, dumps, loads
from daemon.util import now_iso

log = logging.getLogger("svcd.experiments")

DEFAULT_SCENARIO_TIMEOUT_S = 30 * 60.0
TIMEOUT_GRACE_S = 30.0
OUTER_TIMEOUT_MARGIN_S = 60.0
SHUTDOWN_GRACE_S = 10.0
AT_CAPACITY_RETRY_S = 3.0
TOPIC_RETENTION_S = 600.0

RunScenario = Callable[..., Awaitable[dict[str, Any]]]
SERVICE_KEY = web.AppKey("experiment_service", object)
# The seam: tests (and the benchmark) may put their own scenario function here before startup;
# by default it is daemon.runner.scenario.run_scenario (issue 5).
RUN_SCENARIO_KEY = "experiments.run_scenario"
COMPLETED_HOOKS_KEY = "experiments.completed_hooks"


class ScenarioTimeout(Exception):
    def __init__(self, timeout_s: float, run: dict | None):
        super().__init__(f"timeout: the scenario exceeded resources.timeout ({_fmt_s(timeout_s)}), which covers setup, agent and scoring")
        self.run = run


class GroupFailed(Exception):
    """The experiment or suite itself cannot proceed (for example its spec version is gone)."""


def _fmt_s(seconds: float) -> str:
    from daemon.spec import format_duration

    try:
        return format_duration(seconds)
    except ValueError:
        return f"{seconds}s"


@dataclass
class GroupContext:
    kind: str  # experiment | suite
    id: str
    tenant_id: str
    spec_record: dict[str, Any]
    spec: SpecDocument
    inputs: dict[str, Any] | None
    cap: int | None
    secret_names: list[str] = field(default_factory=list)

    @property
    def limit_key(self) -> str:
        return f"{self.tenant_id}:{self.spec_record['id']}"

    @property
    def key_limit(self) -> int | None:
        return self.spec.resources.concurrency_limit

    @property
    def timeout_s(self) -> float:
        """The runner enforces resources.timeout itself (verdict error, reason scenario_timeout);
        this outer bound is the safety net, a little later so the runner's verdict wins."""
        return float(self.spec.resources.timeout or DEFAULT_SCENARIO_TIMEOUT_S) + OUTER_TIMEOUT_MARGIN_S

    @property
    def topic(self) -> str:
        return f"experiment:{self.id}" if self.kind == "experiment" else f"replicas:{self.id}"


async def default_run_scenario(app: web.Application, **kwargs: Any) -> dict[str, Any]:
    """Adapter to issue 5's runner, imported lazily so this module loads without it."""
    try:
        from daemon.runner.scenario import run_scenario
    except ImportError as exc:
        raise RuntimeError(f"the scenario runner is not available in this build ({exc})") from exc
    return await run_scenario(app, **kwargs)


class ExperimentService:
    def __init__(self, app: web.Application, limit: int | None = None):
        self.app = app
        settings = app["settings"]
        self.limit = limit or default_global_limit(settings.max_sandboxes)
        self.scheduler = Scheduler(self._run_job, self.limit)
        self.secrets: dict[str, dict[str, str]] = {}
        self.contexts: dict[str, GroupContext] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.cancelled: set[str] = set()
        self.shutting_down = False

    @property
    def store(self) -> Store:
        return self.app["store"]

    @property
    def events(self):
        return self.app["events"]

    @property
    def run_scenario(self) -> RunScenario:
        return self.app.get(RUN_SCENARIO_KEY) or default_run_scenario

    def lock(self, group_id: str) -> asyncio.Lock:
        return self.locks.setdefault(group_id, asyncio.Lock())

    # --- contexts --------------------------------------------------------------------------------

    async def context(self, group_id: str) -> GroupContext:
        ctx = self.contexts.get(group_id)
        if ctx is not None:
            return ctx
        if group_id.startswith("rep_"):
            row = await self.store.fetchone("SELECT * FROM replica_suites WHERE id = ?", (group_id,))
            kind, cap = "suite", None
        else:
            row = await self.store.fetchone("SELECT * FROM experiments WHERE id = ?", (group_id,))
            kind = "experiment"
            cap = row["concurrency"] if row is not None else None
        if row is None:
            raise GroupFailed(f"{group_id} no longer exists")
        record = await spec_store.get(self.store, row["tenant_id"], row["spec_id"], row["spec_version"])
        if record is None:
            raise GroupFailed(f"spec '{row['spec_id']}' version {row['spec_version']} no longer exists")
        try:
            spec = load_spec(record["yaml"], f"{record['id']}.yaml")
        except Exception as exc:
            raise GroupFailed(f"spec '{row['spec_id']}' version {row['spec_version']} no longer loads: {str(exc).splitlines()[0]}")
        ctx = GroupContext(kind, group_id, row["tenant_id"], record, spec, loads(row["inputs"], None), cap,
                           loads(row["secret_names"], []))
        if row["status"] in ("created", "running"):
            self.contexts[group_id] = ctx
        return ctx

    def remember(self, ctx: GroupContext, secrets: dict[str, str] | None) -> None:
        self.contexts[ctx.id] = ctx
        if secrets:
            self.secrets[ctx.id] = dict(secrets)

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.recover()

    async def stop(self) -> None:
        self.shutting_down = True
        await self.scheduler.close(SHUTDOWN_GRACE_S)

    async def recover(self) -> None:
        """Re-queue what a previous daemon left behind (see the module docstring)."""
        now = now_iso()
        stale = await self.store.fetchall("SELECT * FROM scenario_jobs WHERE state = 'running'")
        for job in stale:
            if job["attempts"] >= 2:
                await self._finish_job(job["id"], status="errored", run=None, wall_ms=None, state="done",
                                       error="daemon_restart: the daemon stopped while this run was running, twice; not retried again")
            else:
                previous = loads(job["previous_run_ids"], []) + [job["run_id"]]
                await self.store.execute(
                    "UPDATE scenario_jobs SET state = 'queued', run_id = ?, previous_run_ids = ?, queued_at = ?, started_at = NULL"
                    " WHERE id = ? AND state = 'running'",
                    (seeds.run_id(), dumps(previous), now, job["id"]),
                )
        # A group cancelled (or failed) while some of its jobs were running: nothing to resume.
        orphans = await self.store.fetchall(
            "SELECT DISTINCT group_id FROM scenario_jobs WHERE state = 'queued' AND group_id NOT IN"
            " (SELECT id FROM experiments WHERE status = 'running' UNION ALL SELECT id FROM replica_suites WHERE status = 'running')"
        )
        for orphan in orphans:
            await self.store.execute(
                "UPDATE scenario_jobs SET state = 'cancelled', finished_at = ? WHERE group_id = ? AND state = 'queued'",
                (now, orphan["group_id"]),
            )
            for scenario in await self.store.fetchall("SELECT id FROM scenarios WHERE experiment_id = ?", (orphan["group_id"],)):
                await self.refresh_scenario(scenario["id"])
        groups = await self.store.fetchall(
            "SELECT id, 'experiment' AS kind, seq FROM experiments WHERE status = 'running'"
            " UNION ALL SELECT id, 'suite' AS kind, seq FROM replica_suites WHERE status = 'running' ORDER BY seq"
        )
        resumed = 0
        for group in groups:
            try:
                ctx = await self.context(group["id"])
            except GroupFailed as exc:
                await self.fail_group(group["id"], group["kind"], str(exc))
                continue
            if ctx.kind == "experiment":
                for scenario in await self.store.fetchall("SELECT id FROM scenarios WHERE experiment_id = ?", (ctx.id,)):
                    await self.refresh_scenario(scenario["id"])
            queued = await self.store.fetchall(
                "SELECT id FROM scenario_jobs WHERE group_id = ? AND state = 'queued' ORDER BY seq", (ctx.id,)
            )
            await self._seed_history(ctx)
            if queued:
                resumed += len(queued)
                self.scheduler.submit([self._job(ctx, row["id"]) for row in queued], cap=ctx.cap)
            else:
                await self.maybe_finish(ctx.id)
        if stale or resumed:
            log.info("recovered scenario jobs: %d were running, %d queued resumed", len(stale), resumed)

    async def _seed_history(self, ctx: GroupContext) -> None:
        """After a restart, replay finished replicas into the suite's topic so a stream
        subscriber still sees every completion."""
        if ctx.kind != "suite":
            return
        rows = await self.store.fetchall(
            "SELECT * FROM scenario_jobs WHERE group_id = ? AND state = 'done' ORDER BY done_seq", (ctx.id,)
        )
        for row in rows:
            self.events.publish(ctx.topic, replica_event(row))

    def _job(self, ctx: GroupContext, job_id: str) -> Job:
        return Job(id=job_id, group_id=ctx.id, limit_key=ctx.limit_key, key_limit=ctx.key_limit)

    # --- starting groups -------------------------------------------------------------------------

    async def enqueue_group(self, ctx: GroupContext) -> int:
        """Move the group's pending jobs to queued and hand them to the scheduler."""
        now = now_iso()
        await self.store.execute(
            "UPDATE scenario_jobs SET state = 'queued', queued_at = ? WHERE group_id = ? AND state = 'pending'", (now, ctx.id)
        )
        rows = await self.store.fetchall(
            "SELECT id FROM scenario_jobs WHERE group_id = ? AND state = 'queued' ORDER BY seq", (ctx.id,)
        )
        if ctx.kind == "experiment":
            await self.store.execute("UPDATE scenarios SET status = 'queued' WHERE experiment_id = ?", (ctx.id,))
        if rows:
            self.scheduler.submit([self._job(ctx, row["id"]) for row in rows], cap=ctx.cap)
        else:
            await self.maybe_finish(ctx.id)
        return len(rows)

    async def cancel_group(self, group_id: str) -> None:
        """Queued jobs are dropped; running ones are asked to stop (their results are kept when
        they finish anyway)."""
        self.cancelled.add(group_id)
        self.scheduler.cancel_group(group_id)
        await self.store.execute(
            "UPDATE scenario_jobs SET state = 'cancelled', finished_at = ? WHERE group_id = ? AND state IN ('pending', 'queued')",
            (now_iso(), group_id),
        )
        if group_id.startswith("exp-"):
            for scenario in await self.store.fetchall("SELECT id FROM scenarios WHERE experiment_id = ?", (group_id,)):
                await self.refresh_scenario(scenario["id"])
        await self.maybe_finish(group_id)

    async def fail_group(self, group_id: str, kind: str, message: str) -> None:
        log.warning("%s %s failed: %s", kind, group_id, message)
        self.scheduler.cancel_group(group_id)
        now = now_iso()
        await self.store.execute(
            "UPDATE scenario_jobs SET state = 'cancelled', finished_at = ?, error = ? WHERE group_id = ? AND state IN ('pending', 'queued', 'running')",
            (now, message, group_id),
        )
        table, status = ("experiments", "failed") if kind == "experiment" else ("replica_suites", "errored")
        await self.store.execute(
            f"UPDATE {table} SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status IN ('created', 'running')",
            (status, message, now, group_id),
        )
        if kind == "experiment":
            for scenario in await self.store.fetchall("SELECT id FROM scenarios WHERE experiment_id = ?", (group_id,)):
                await self.refresh_scenario(scenario["id"])
        await self.maybe_finish(group_id)

    # --- the job function ------------------------------------------------------------------------

    async def _run_job(self, job: Job, cancel: asyncio.Event) -> Any:
        try:
            ctx = await self.context(job.group_id)
        except GroupFailed as exc:
            kind = "suite" if job.group_id.startswith("rep_") else "experiment"
            await self.fail_group(job.group_id, kind, str(exc))
            return None
        row = await self.store.fetchone("SELECT * FROM scenario_jobs WHERE id = ?", (job.id,))
        if row is None or row["state"] != "queued":
            return None
        started_at = now_iso()
        await self.store.execute(
            "UPDATE scenario_jobs SET state = 'running', attempts = attempts + 1, started_at = ? WHERE id = ? AND state = 'queued'",
            (started_at, job.id),
        )
        if ctx.kind == "experiment" and row["scenario_id"]:
            await self.store.execute("UPDATE scenarios SET status = 'running' WHERE id = ? AND status = 'queued'", (row["scenario_id"],))
        if ctx.kind == "experiment":
            self.events.publish(ctx.topic, {"type": "run_started", "job_id": job.id, "scenario_id": row["scenario_id"],
                                            "replica_index": row["replica_index"], "run_id": row["run_id"], "seed": row["seed"]})

        missing = self._lost_secret(ctx)
        if missing:
            await self._complete(ctx, row, status="errored", error=missing, run=None, wall_ms=0)
            return None

        started = time.perf_counter()
        matrix_entry = None
        if ctx.kind == "experiment":
            scenario = await self.store.fetchone("SELECT matrix_entry FROM scenarios WHERE id = ?", (row["scenario_id"],))
            matrix_entry = loads(scenario["matrix_entry"], {}) if scenario else {}
        kwargs = dict(
            tenant_id=ctx.tenant_id,
            spec_record=ctx.spec_record,
            spec=ctx.spec,
            run_id=row["run_id"],
            seed=row["seed"],
            inputs=ctx.inputs,
            matrix_entry=matrix_entry or None,
            secrets=self.secrets.get(ctx.id) or None,
            experiment_id=ctx.id if ctx.kind == "experiment" else None,
            scenario_id=row["scenario_id"],
            cancel=cancel,
        )
        status: str
        error: str | None = None
        run: dict | None = None
        try:
            run = await self._call_runner(kwargs, ctx.timeout_s, cancel)
        except ScenarioTimeout as exc:
            run, status, error = exc.run, "errored", str(exc)
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
        else:
            status = _run_status(run)
            error = _run_error(run) if status == "errored" else None
        stopped_by_us = cancel.is_set() and status == "errored" and (run is None or _was_cancelled(run))
        if self.shutting_down and stopped_by_us:
            # Interrupted by our own shutdown: it runs again at the next start, attempt not counted.
            await self._put_back(job.id)
            return None
        wall_ms = int((time.perf_counter() - started) * 1000)
        if stopped_by_us and job.group_id in self.cancelled:
            # The experiment was cancelled under it: the run does not count as an errored replica.
            await self._complete(ctx, row, status=None, error=error or "cancelled", run=run, wall_ms=wall_ms, state="cancelled")
            return None
        await self._complete(ctx, row, status=status, error=error, run=run, wall_ms=wall_ms)
        return None

    async def _call_runner(self, kwargs: dict[str, Any], timeout_s: float, cancel: asyncio.Event) -> dict[str, Any]:
        task = asyncio.ensure_future(self.run_scenario(self.app, **kwargs))
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

    def _lost_secret(self, ctx: GroupContext) -> str | None:
        """A secret that was sent with the group but is no longer in memory (daemon restart)."""
        held = self.secrets.get(ctx.id, {})
        for name in ctx.secret_names:
            if name not in held:
                source = ctx.spec.secrets.get(name, "request")
                return (f"secret '{name}' (source {source}) is missing: it was sent with {ctx.id} and secrets are held in"
                        " memory only, so it was lost when the daemon restarted")
        return None

    async def _put_back(self, job_id: str) -> None:
        """The job did not really run (shutdown, at capacity): queued again, attempt not counted."""
        await self.store.execute(
            "UPDATE scenario_jobs SET state = 'queued', attempts = MAX(0, attempts - 1), started_at = NULL"
            " WHERE id = ? AND state = 'running'",
            (job_id,),
        )

    async def _complete(self, ctx: GroupContext, row: Any, *, status: str | None, error: str | None, run: dict | None,
                        wall_ms: int | None, state: str = "done") -> None:
        changed = await self._finish_job(row["id"], status=status, error=error, run=run, wall_ms=wall_ms, state=state)
        if not changed:
            return
        fresh = await self.store.fetchone("SELECT * FROM scenario_jobs WHERE id = ?", (row["id"],))
        event = replica_event(fresh)
        if ctx.kind == "experiment":
            event = {"type": "run", "experiment_id": ctx.id, "scenario_id": fresh["scenario_id"],
                     **{k: v for k, v in event.items() if k != "type"}, "error": fresh["error"]}
            self.events.publish(ctx.topic, event)
            await self.refresh_scenario(fresh["scenario_id"])
        else:
            self.events.publish(ctx.topic, event)
        await self.maybe_finish(ctx.id)

    async def _finish_job(self, job_id: str, *, status: str | None, error: str | None, run: dict | None, wall_ms: int | None,
                          state: str = "done") -> bool:
        score = run.get("score") if isinstance(run, dict) else None
        cost = run_cost(run)
        group = await self.store.fetchone("SELECT group_id FROM scenario_jobs WHERE id = ?", (job_id,))
        if group is None:
            return False
        count = await self.store.execute(
            "UPDATE scenario_jobs SET state = ?, status = ?, score = ?, error = ?, result = ?, wall_ms = ?, cost_usd = ?,"
            " finished_at = ?, done_seq = (SELECT COALESCE(MAX(done_seq), 0) + 1 FROM scenario_jobs WHERE group_id = ?)"
            " WHERE id = ? AND state IN ('running', 'queued')",
            (state, status, score if isinstance(score, (int, float)) else None, error,
             dumps(_trim_run(run)) if run is not None else None, wall_ms, cost, now_iso(), group["group_id"], job_id),
        )
        return count > 0

    # --- scenario rows and completion -------------------------------------------------------------

    async def refresh_scenario(self, scenario_id: str) -> None:
        """Recompute a scenario row's status/verdict from its jobs (used by the scenarios filter)."""
        from daemon.experiments.results import scenario_status
        from daemon.experiments.stats import aggregate_replicas

        scn = await self.store.fetchone(
            "SELECT s.*, e.status AS experiment_status, e.id AS eid FROM scenarios s JOIN experiments e ON e.id = s.experiment_id WHERE s.id = ?",
            (scenario_id,),
        )
        if scn is None:
            return
        jobs = await self.store.fetchall("SELECT * FROM scenario_jobs WHERE scenario_id = ? ORDER BY replica_index", (scenario_id,))
        strategy, min_rate = "majority", None
        ctx = self.contexts.get(scn["eid"])
        if ctx is not None:
            agg = ctx.spec.scoring.replica_aggregation
            strategy, min_rate = agg.strategy, agg.min_pass_rate
        else:
            try:
                ctx = await self.context(scn["eid"])
                agg = ctx.spec.scoring.replica_aggregation
                strategy, min_rate = agg.strategy, agg.min_pass_rate
            except GroupFailed:
                pass
        finished = [j for j in jobs if j["status"] is not None]
        aggregated = aggregate_replicas([j["status"] for j in finished], strategy, min_rate)
        status = scenario_status(jobs, scn["experiment_status"], aggregated)
        done = status in ("pass", "fail", "flaky", "error")
        scores = [j["score"] for j in finished if j["score"] is not None]
        old = scn["status"]
        await self.store.execute(
            "UPDATE scenarios SET status = ?, verdict = ?, passed = ?, score = ?, finished_at = ? WHERE id = ?",
            (status, aggregated["verdict"] if done else None, (1 if aggregated["passed"] else 0) if done else None,
             sum(scores) / len(scores) if scores else None, (scn["finished_at"] or now_iso()) if done or status == "cancelled" else None,
             scenario_id),
        )
        if old != status:
            self.events.publish(f"experiment:{scn['eid']}", {"type": "scenario", "experiment_id": scn["eid"], "scenario_id": scenario_id,
                                                             "status": status, "verdict": aggregated["verdict"] if done else None})

    async def maybe_finish(self, group_id: str) -> None:
        async with self.lock(group_id):
            live = await self.store.fetchone(
                "SELECT COUNT(*) AS n FROM scenario_jobs WHERE group_id = ? AND state IN ('queued', 'running')", (group_id,)
            )
            if live["n"]:  # the store is the truth: a finishing job is already `done` there
                return
            if group_id.startswith("rep_"):
                await self._finish_suite(group_id)
            else:
                await self._finish_experiment(group_id)

    async def _finish_experiment(self, experiment_id: str) -> None:
        from daemon.experiments.metrics import summary_for

        row = await self.store.fetchone("SELECT * FROM experiments WHERE id = ?", (experiment_id,))
        if row is None or row["status"] == "created":
            return
        pending = await self.store.fetchone(
            "SELECT COUNT(*) AS n FROM scenario_jobs WHERE group_id = ? AND state = 'pending'", (experiment_id,)
        )
        if row["status"] == "running" and pending["n"]:
            return
        topic = f"experiment:{experiment_id}"
        if row["status"] == "running":
            await self.store.execute(
                "UPDATE experiments SET status = 'completed', finished_at = ? WHERE id = ? AND status = 'running'",
                (now_iso(), experiment_id),
            )
        elif row["summary"] is not None and topic in self.events.closed:
            return
        try:
            summary = await summary_for(self.store, row["tenant_id"], experiment_id)
        except Exception:
            log.exception("metrics summary of %s failed", experiment_id)
            summary = None
        if summary is not None:
            await self.store.execute("UPDATE experiments SET summary = ? WHERE id = ?", (dumps(summary), experiment_id))
        final = await self.store.fetchone("SELECT status, finished_at, total_runs FROM experiments WHERE id = ?", (experiment_id,))
        self.events.publish(topic, {"type": "done", "experiment_id": experiment_id, "status": final["status"],
                                    "finished_at": final["finished_at"], "total_runs": final["total_runs"], "summary": summary})
        self._close_topic(topic)
        self._forget(experiment_id)
        for hook in list(self.app.get(COMPLETED_HOOKS_KEY, [])):
            try:
                await hook(self.app, experiment_id, final["status"])
            except Exception:
                log.exception("experiment-completed hook %r failed for %s", hook, experiment_id)

    async def _finish_suite(self, suite_id: str) -> None:
        from daemon.experiments.suites import suite_body

        row = await self.store.fetchone("SELECT * FROM replica_suites WHERE id = ?", (suite_id,))
        if row is None:
            return
        topic = f"replicas:{suite_id}"
        if row["status"] == "running":
            await self.store.execute(
                "UPDATE replica_suites SET status = 'complete', finished_at = ? WHERE id = ? AND status = 'running'", (now_iso(), suite_id)
            )
        elif topic in self.events.closed:
            return
        body = await suite_body(self, suite_id)
        self.events.publish(topic, {"type": "done", "suite": body})
        self._close_topic(topic)
        self._forget(suite_id)
        await _emit_webhook(self.app, row["tenant_id"], "replica.completed", body)

    def _close_topic(self, topic: str) -> None:
        """Close a stream topic; its history stays for late subscribers for a while, then the
        stream is rebuilt from the store."""
        self.events.close(topic)
        try:
            asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, self.events.forget, topic)
        except RuntimeError:
            pass

    def _forget(self, group_id: str) -> None:
        self.secrets.pop(group_id, None)
        self.contexts.pop(group_id, None)
        self.cancelled.discard(group_id)
        self.locks.pop(group_id, None)


# --- helpers ----------------------------------------------------------------------------------------


def replica_event(job: Any) -> dict[str, Any]:
    """The replica stream's per-completion event (DECISIONS: {type, index, seed, run_id, status,
    score, duration_ms})."""
    run = loads(job["result"], None) or {}
    duration = run.get("duration_ms")
    return {
        "type": "replica",
        "index": job["replica_index"],
        "seed": job["seed"],
        "run_id": job["run_id"],
        "status": job["status"],
        "score": job["score"],
        "duration_ms": duration if isinstance(duration, int) else job["wall_ms"],
    }


def _run_status(run: Any) -> str:
    if not isinstance(run, dict):
        return "errored"
    status = run.get("status")
    if status in ("passed", "failed", "errored"):
        return status
    verdict = run.get("verdict")
    for name, short in RUN_VERDICT.items():
        if verdict == short:
            return name
    return "errored"


def _run_error(run: Any) -> str | None:
    """`<code>: <message>` from the run's error object, else its reason."""
    if not isinstance(run, dict):
        return "the scenario runner returned no run"
    error = run.get("error")
    if isinstance(error, dict) and (error.get("message") or error.get("code")):
        code, message = error.get("code"), error.get("message")
        return f"{code}: {message}" if code and message else str(message or code)
    if isinstance(error, str) and error:
        return error
    reason = run.get("reason")
    return reason if isinstance(reason, str) and reason else None


def _was_cancelled(run: Any) -> bool:
    if not isinstance(run, dict):
        return False
    error = run.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return "cancelled" in (code, run.get("reason"))


def _trim_run(run: dict | None) -> dict | None:
    if not isinstance(run, dict):
        return None
    return {k: v for k, v in run.items() if k not in ("trajectory", "trace", "events", "audit")}


def _is_at_capacity(exc: Exception) -> bool:
    from daemon.errors import AtCapacity

    return isinstance(exc, AtCapacity) or type(exc).__name__ in ("AtCapacity", "SandboxAtCapacity")


async def _emit_webhook(app: web.Application, tenant_id: str, event: str, body: dict[str, Any]) -> None:
    """Hand the event to issue 5's webhook dispatcher when it is present."""
    try:
        from daemon import webhooks
    except ImportError:
        return
    for name in ("emit", "enqueue"):
        fn = getattr(webhooks, name, None)
        if fn is None:
            continue
        try:
            result = fn(app, tenant_id, event, body)
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("webhook %s for %s failed to enqueue", event, tenant_id)
        return


def get_service(app: web.Application) -> ExperimentService:
    return app[SERVICE_KEY]
