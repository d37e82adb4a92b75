"""The run lifecycle behind ``/v1/runs``: a queue, a few workers, cancel, and restart recovery.

* ``submit`` queues a run (its request secrets stay in memory only); a worker loads the spec
  version and calls :func:`daemon.runner.scenario.run_scenario`. When the sandbox pool is full the
  run waits (still ``queued``) and is retried.
* ``cancel``: a queued run is errored at once; a running one is stopped through its cancel event
  (this works for experiment runs too: every running scenario registers one) and ends ``errored``
  with reason ``cancelled``.
* On start, runs a previous daemon left ``running`` are marked ``errored`` (reason
  ``daemon_restart``); ``queued`` ones are queued again, unless they were sent with secrets, which
  did not survive the restart (then ``errored``, reason ``daemon_restart``, naming them).
* Concurrency: ``SERVICE_RUN_CONCURRENCY`` workers (default: what the machine holds,
  ``max(1, min(cpu_count, max_sandboxes // 2))``).
* Fairness: the queue is round-robin by tenant (:class:`FairQueue`): a tenant that queued a hundred
  runs does not hold back another tenant's one run; within a tenant, runs start in order.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import deque
from typing import Any

from daemon.errors import AtCapacity
from daemon.runner import records
from daemon.runner.scenario import CANCEL_KEY, run_body, run_scenario, topic
from daemon.store.db import loads
from daemon.util import now_iso

log = logging.getLogger("svcd.runs")
AT_CAPACITY_RETRY_S = 2.0


def worker_count(max_sandboxes: int) -> int:
    raw = os.environ.get("SERVICE_RUN_CONCURRENCY", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return max(1, min(os.cpu_count() or 1, max_sandboxes // 2))


class FairQueue:
    """FIFO per tenant, round-robin across tenants: `get` takes the oldest run of the tenant whose
    turn it is, then that tenant goes to the back of the line."""

    def __init__(self) -> None:
        self._lanes: dict[str, deque[str]] = {}
        self._turns: deque[str] = deque()  # tenants with queued runs, next first
        self._items = asyncio.Semaphore(0)  # one token per queued run

    def put_nowait(self, item: str, tenant: str = "") -> None:
        lane = self._lanes.setdefault(tenant, deque())
        if not lane:
            self._turns.append(tenant)
        lane.append(item)
        self._items.release()

    def _take(self) -> str:
        tenant = self._turns.popleft()
        lane = self._lanes[tenant]
        item = lane.popleft()
        if lane:
            self._turns.append(tenant)
        else:
            del self._lanes[tenant]
        return item

    async def get(self) -> str:
        await self._items.acquire()
        return self._take()

    def qsize(self) -> int:
        return sum(len(lane) for lane in self._lanes.values())

    def empty(self) -> bool:
        return not self._turns


class RunService:
    def __init__(self, app: Any):
        self.app = app
        self.queue = FairQueue()
        self.secrets: dict[str, dict[str, str]] = {}
        self.active: dict[str, asyncio.Task] = {}
        self.workers: list[asyncio.Task] = []

    @property
    def store(self):
        return self.app["store"]

    async def start(self) -> None:
        await self.recover()
        for i in range(worker_count(self.app["settings"].max_sandboxes)):
            self.workers.append(asyncio.create_task(self._worker(), name=f"svc-run-worker-{i}"))

    async def close(self) -> None:
        for task in self.workers:
            task.cancel()
        await asyncio.gather(*self.workers, return_exceptions=True)

    async def recover(self) -> dict[str, int]:
        running = await self.store.fetchall("SELECT id, tenant_id FROM runs WHERE status = 'running'")
        for row in running:
            await self._error_now(row["id"], "daemon_restart",
                                  "the daemon stopped while this run was running; replay it with POST /v1/runs/{id}/replay")
        queued = await self.store.fetchall("SELECT id, tenant_id, secret_names FROM runs WHERE status = 'queued' AND experiment_id IS NULL ORDER BY seq")
        requeued = 0
        for row in queued:
            names = loads(row["secret_names"], [])
            if names:
                await self._error_now(row["id"], "daemon_restart",
                                      f"the daemon restarted before this run started and its request secrets ({', '.join(names)}) are held in memory only")
            else:
                self.queue.put_nowait(row["id"], row["tenant_id"])
                requeued += 1
        if running or queued:
            log.info("run recovery", extra={"errored": len(running), "requeued": requeued})
        return {"errored": len(running) + len(queued) - requeued, "requeued": requeued}

    def submit(self, run_id: str, secrets: dict[str, str] | None, tenant_id: str = "") -> None:
        if secrets:
            self.secrets[run_id] = dict(secrets)
        self.queue.put_nowait(run_id, tenant_id)

    async def _worker(self) -> None:
        while True:
            run_id = await self.queue.get()
            task = asyncio.current_task()
            try:
                self.active[run_id] = task  # type: ignore[assignment]
                await self._execute(run_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("run %s failed in its worker", run_id)
                await self._error_now(run_id, "internal_error", "the run worker failed unexpectedly; see the daemon log")
            finally:
                self.active.pop(run_id, None)
                self.secrets.pop(run_id, None)

    async def _execute(self, run_id: str) -> None:
        from daemon.spec import load_spec
        from daemon.store import specs as spec_store

        row = await records.get(self.store, run_id)
        if row is None or row["status"] != "queued":
            return
        record = await spec_store.get(self.store, row["tenant_id"], row["spec_id"], row["spec_version"])
        if record is None:
            await self._error_now(run_id, "spec_missing", f"spec '{row['spec_id']}' version {row['spec_version']} no longer exists")
            return
        spec = load_spec(record["yaml"], f"{record['id']}.yaml")
        cancel = asyncio.Event()
        registry = self.app[CANCEL_KEY]
        try:
            while True:
                registry[run_id] = cancel
                try:
                    await run_scenario(
                        self.app, tenant_id=row["tenant_id"], spec_record=record, spec=spec, run_id=run_id, seed=row["seed"],
                        inputs=loads(row["inputs"], None), matrix_entry=loads(row["matrix_entry"], None),
                        secrets=self.secrets.get(run_id), sandbox_id=row["sandbox_id"] if not row["own_sandbox"] else None,
                        experiment_id=row["experiment_id"], scenario_id=row["scenario_id"], cancel=cancel,
                    )
                    return
                except AtCapacity:
                    registry[run_id] = cancel  # the run is queued again; a cancel must still find it
                    try:
                        await asyncio.wait_for(cancel.wait(), AT_CAPACITY_RETRY_S)
                    except asyncio.TimeoutError:
                        continue
                    await self._error_now(run_id, "cancelled", "the run was cancelled while waiting for sandbox capacity")
                    return
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
        if row is not None and row["status"] == "queued":
            await self._error_now(run_id, "cancelled", "the run was cancelled before it started")
            return True
        return False

    async def _error_now(self, run_id: str, reason: str, message: str) -> None:
        """Terminal ``errored`` without running (queued or stale rows)."""
        row = await records.get(self.store, run_id)
        if row is None or row["status"] in records.TERMINAL:
            return
        result = loads(row["result"], {}) or {}
        result["error"] = {"step": "run", "message": message, "code": reason}
        result.setdefault("reproducer", records.reproducer(row["spec_id"], row["spec_version"], row["seed"],
                                                           loads(row["inputs"], None), loads(row["matrix_entry"], None)))
        count = await self.store.execute(
            "UPDATE runs SET status = 'errored', verdict = 'error', reason = ?, result = ?, finished_at = ?"
            " WHERE id = ? AND status IN ('queued', 'running')",
            (reason, json.dumps(result), now_iso(), run_id),
        )
        if not count:
            return
        bus = self.app["events"]
        bus.publish(topic(run_id), {"type": "error", "error": reason, "message": message})
        bus.publish(topic(run_id), {"type": "done", "run_id": run_id, "status": "errored", "score": None})
        bus.close(topic(run_id))
        from daemon.webhooks import emit

        await emit(self.app, row["tenant_id"], "run.completed", await run_body(self.app, run_id))
