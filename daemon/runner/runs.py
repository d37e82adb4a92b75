"""The run lifecycle behind ``/v1/runs``: the ``run`` kind of the job engine, cancel, and restart
recovery.

* ``submit`` hands the run to the job engine (:mod:`daemon.runner.engine`) as a group of one job;
  its request secrets stay in the engine's memory only. The job loads the spec version and calls
  :func:`daemon.runner.scenario.run_scenario`. When the sandbox pool is full the run stays
  ``queued`` and the engine tries it again after its one retry delay.
* ``cancel``: a queued run is errored at once; a running one is stopped through its cancel event
  (this works for experiment runs too: every running scenario registers one) and ends ``errored``
  with reason ``cancelled``.
* Each run has a job row (``scenario_jobs``, kind ``run``; job, group and run id are the run's id)
  like every suite and experiment replica, so a restart takes the engine's one recovery path: a run
  found ``running`` is ``errored`` (reason ``daemon_restart``; ``restart_attempts = 1``: its id is the
  caller's handle, so it never runs twice), a ``queued`` one is queued again in order, unless it was
  sent with secrets, which did not survive the restart (then ``errored``, naming them). Run rows of
  any kind still ``running`` after that (an interrupted replica's old attempt) are closed the same way.
* Concurrency: the engine's limits: the global one, the spec's ``resources.concurrency_limit``
  (shared with experiments and suites of that spec) and, when set, ``SERVICE_RUN_CONCURRENCY`` for
  single runs.
* Fairness: the engine's tenant round-robin: a tenant that queued a hundred runs does not hold back
  another tenant's one run; within a tenant, runs start in order.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from aiohttp import web

from daemon.datasets import experiments as dataset_experiments
from daemon.errors import AtCapacity
from daemon.runner import records
from daemon.runner.engine import RETRY_S, GroupKind, Job, Requeue, engine_of, missing_secrets, recover_interrupted
from daemon.runner.request import ScenarioRequest
from daemon.runner.scenario import CANCEL_KEY, run_body, run_scenario, topic
from daemon.store import jobs as job_store
from daemon.store import runs as run_store
from daemon.store import specs as spec_store
from daemon.util import now_iso
from daemon.appkeys import EVENTS, STORE

if TYPE_CHECKING:
    import sqlite3

    from daemon.store.db import Store

log = logging.getLogger("svcd.runs")


def _concurrency_limit(record: dict[str, Any] | None) -> int | None:
    """The spec version's ``resources.concurrency_limit`` (None when it has none or no longer loads)."""
    if record is None:
        return None
    from daemon.spec import load_spec

    try:
        return load_spec(record["yaml"], f"{record['id']}.yaml").resources.fixed_concurrency
    except Exception:
        return None



class RunKind(GroupKind):
    """``/v1/runs``: a group of one job (the run itself), keyed by the run id."""

    name = "run"
    restart_attempts = 1  # a run found running after a restart is errored, never silently re-run

    def __init__(self, service: "RunService"):
        self.service = service

    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any:
        return await self.service._run_job(job)

    async def describe(self, group_id: str) -> dict[str, Any] | None:
        return await run_body(self.service.app, group_id)

    async def recover(self) -> None:
        await self.service.recover()

    async def give_up_interrupted(self, store: Store, row: sqlite3.Row, message: str) -> None:
        await self.service._error_now(row["run_id"], "daemon_restart",
                                      "the daemon stopped while this run was running; replay it with POST /v1/runs/{id}/replay")


class RunService:
    def __init__(self, app: web.Application):
        self.app = app
        self.engine = engine_of(app)
        self.kind = RunKind(self)
        self.engine.register(self.kind)
        raw = os.environ.get("SERVICE_RUN_CONCURRENCY", "").strip()
        if raw.isdigit() and int(raw) > 0:
            self.engine.scheduler.set_kind_cap(RunKind.name, int(raw))
        self.waiting: set[str] = set()  # runs put back because the sandbox pool was full

    @property
    def store(self) -> Store:
        return self.app[STORE]

    @property
    def secrets(self) -> dict[str, dict[str, str]]:
        return self.engine.secrets

    async def start(self) -> None:
        self.engine.acquire("runs")
        await self.kind.recover()

    async def close(self) -> None:
        await self.engine.release("runs")

    async def recover(self) -> dict[str, int]:
        await job_store.adopt_queued_runs(self.store)
        interrupted = await recover_interrupted(self.store, self.kind)
        for run_id in await run_store.ids_with_status(self.store, "running"):
            await self._error_now(run_id, "daemon_restart",
                                  "the daemon stopped while this run was running; replay it with POST /v1/runs/{id}/replay")
        queued = await job_store.queued_of_kind(self.store, RunKind.name)
        requeued = 0
        for job in queued:
            row = await records.get(self.store, job["run_id"])
            if row is None or row.status != "queued":  # it ended before its job row did
                await self._close_job(job["run_id"])
                continue
            names = missing_secrets(self.engine, row.id, row.secret_names)
            if names:
                await self._error_now(row.id, "daemon_restart",
                                      f"the daemon restarted before this run started and its request secrets ({', '.join(names)}) are held in memory only")
            else:
                record = await spec_store.get(self.store, row.tenant_id, row.spec_id, row.spec_version)
                self._enqueue(row.id, row.tenant_id, row.spec_id, _concurrency_limit(record))
                requeued += 1
        if interrupted or queued:
            log.info("run recovery", extra={"interrupted": interrupted, "requeued": requeued})
        return {"errored": interrupted + len(queued) - requeued, "requeued": requeued}

    async def submit(self, run_id: str, secrets: dict[str, str] | None, tenant_id: str = "", *, spec_id: str | None = None,
                     concurrency_limit: int | None = None) -> None:
        """Queue a run whose row is stored: its job row, then the engine."""
        await job_store.insert_run_job(self.store, run_id)
        self.engine.hold_secrets(run_id, secrets)
        self._enqueue(run_id, tenant_id, spec_id, concurrency_limit)

    def _enqueue(self, run_id: str, tenant_id: str, spec_id: str | None, concurrency_limit: int | None) -> None:
        self.engine.submit([Job(id=run_id, group_id=run_id, tenant=tenant_id, kind=RunKind.name,
                                limit_key=f"{tenant_id}:{spec_id}" if spec_id else None, key_limit=concurrency_limit)])

    async def _run_job(self, job: Job) -> Any:
        run_id = job.id
        self.waiting.discard(run_id)
        try:
            return await self._execute(run_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run %s failed in its worker", run_id)
            await self._error_now(run_id, "internal_error", "the run worker failed unexpectedly; see the daemon log")
        finally:
            if run_id not in self.waiting:
                self.engine.drop_secrets(run_id)
                await asyncio.shield(self._close_job(run_id))
        return None

    async def _close_job(self, run_id: str) -> None:
        """The job row follows its run once the run is terminal (written once)."""
        row = await records.get(self.store, run_id)
        if row is None or row.status not in records.TERMINAL:
            return
        await job_store.finish(self.store, run_id, state="done", status=row.status, score=row.score, error=row.reason,
                               result=None, wall_ms=row.duration_ms, cost_usd=None, now=now_iso())

    async def _execute(self, run_id: str) -> Any:
        from daemon.spec import load_spec

        row = await records.get(self.store, run_id)
        if row is None or row.status != "queued":
            return None
        record = await spec_store.get(self.store, row.tenant_id, row.spec_id, row.spec_version)
        if record is None:
            await self._error_now(run_id, "spec_missing", f"spec '{row.spec_id}' version {row.spec_version} no longer exists")
            return None
        spec = load_spec(record["yaml"], f"{record['id']}.yaml")
        inputs, dataset_record = row.inputs, None
        if row.experiment_id is None:  # a reproducer or replay of a dataset scenario reads its record again
            try:
                found = await dataset_experiments.replay_record(self.store, row.tenant_id, row.matrix_entry)
            except LookupError as exc:
                await self._error_now(run_id, "dataset_record_missing", str(exc))
                return None
            if found is not None:
                inputs = {**(inputs or {}), **dataset_experiments.record_inputs(found)}
                dataset_record = dataset_experiments.runner_record(found)
        await job_store.mark_running(self.store, run_id, now_iso(), self.engine.limit)
        cancel = asyncio.Event()
        registry = self.app[CANCEL_KEY]
        registry[run_id] = cancel
        try:
            await run_scenario(self.app, ScenarioRequest(
                tenant_id=row.tenant_id, spec_record=record, spec=spec, run_id=run_id, seed=row.seed,
                inputs=inputs, matrix_entry=row.matrix_entry,
                secrets=self.engine.secrets_of(run_id), sandbox_id=row.sandbox_id if not row.own_sandbox else None,
                experiment_id=row.experiment_id, scenario_id=row.scenario_id, cancel=cancel, dataset_record=dataset_record,
                pins=row.pins, queued_at=row.created_at,
            ))
            return None
        except AtCapacity:
            if cancel.is_set():
                await self._error_now(run_id, "cancelled", "the run was cancelled while waiting for sandbox capacity")
                return None
            self.waiting.add(run_id)  # still `queued`; the engine tries it again after RETRY_S
            await job_store.put_back(self.store, run_id)
            return Requeue(RETRY_S, "at capacity")
        finally:
            if registry.get(run_id) is cancel:
                registry.pop(run_id, None)

    async def cancel(self, run_id: str) -> bool:
        """True when a cancel was delivered to a running or queued run."""
        event = self.app[CANCEL_KEY].get(run_id)
        if event is not None:
            event.set()
            return True
        row = await records.get(self.store, run_id)
        if row is not None and row.status == "queued":
            if run_id in self.waiting:
                self.waiting.discard(run_id)
                self.engine.drop_secrets(run_id)
                await self._error_now(run_id, "cancelled", "the run was cancelled while waiting for sandbox capacity")
            else:
                await self._error_now(run_id, "cancelled", "the run was cancelled before it started")
            return True
        return False

    async def _error_now(self, run_id: str, reason: str, message: str) -> None:
        """Terminal ``errored`` without running (queued or stale rows)."""
        row = await records.get(self.store, run_id)
        if row is None or row.status in records.TERMINAL:
            return
        result = dict(row.result)
        result["error"] = {"step": "run", "message": message, "code": reason}
        result.setdefault("reproducer", records.reproducer(row.spec_id, row.spec_version, row.seed,
                                                           row.inputs, row.matrix_entry))
        count = await run_store.error_unfinished(self.store, run_id, reason, result)
        await self._close_job(run_id)
        if not count:
            return
        bus = self.app[EVENTS]
        bus.publish(topic(run_id), {"type": "error", "error": reason, "message": message})
        bus.publish(topic(run_id), {"type": "done", "run_id": run_id, "status": "errored", "score": None})
        bus.close(topic(run_id))
        from daemon.webhooks import emit

        body = await run_body(self.app, run_id)
        if body is not None:
            await emit(self.app, row.tenant_id, "run.completed", body)
