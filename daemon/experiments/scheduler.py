"""The scenario scheduler: one queue of jobs, three limits, round-robin between groups.

A *job* is one replica run of one scenario. A *group* is what submitted it (an experiment or a
replica suite). Limits, all checked before a job starts:

- the global limit (``SERVICE_MAX_CONCURRENT_RUNS``; default what the machine can hold:
  ``max(1, min(cpu_count, max_sandboxes // 2))``);
- the job's ``limit_key`` / ``key_limit``: a spec's ``resources.concurrency_limit``, shared by every
  experiment and suite running that spec (key ``<tenant>:<spec_id>``);
- the group's own cap (an experiment's ``concurrency``).

Fairness: groups take turns. Each dispatch scans the groups from a rotating cursor and starts the
first eligible job, then moves the cursor past that group, so two experiments submitted one after
another interleave instead of the second waiting for the first to drain.

The scheduler is in memory only. Persistence (queued jobs surviving a restart, running ones
retried or errored) is the service's business: it re-submits what the store says is queued.
The job function is the seam: ``await run(job, cancel_event)``; it may return :class:`Requeue`
to put the job back at the head of its group after a delay (for example the sandbox pool is at
capacity).
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

log = logging.getLogger("svcd.scheduler")


def default_global_limit(max_sandboxes: int = 16) -> int:
    raw = os.environ.get("SERVICE_MAX_CONCURRENT_RUNS", "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            raise SystemExit(f"SERVICE_MAX_CONCURRENT_RUNS must be an integer, got {raw!r}")
        if value < 1:
            raise SystemExit(f"SERVICE_MAX_CONCURRENT_RUNS must be at least 1, got {value}")
        return value
    return max(1, min(os.cpu_count() or 1, max_sandboxes // 2))


@dataclass(eq=False)
class Job:
    id: str
    group_id: str
    limit_key: str | None = None
    key_limit: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class Requeue:
    """Returned by a job function: run this job again later (it did not really start)."""

    delay_s: float = 2.0
    reason: str = ""


JobFn = Callable[[Job, asyncio.Event], Awaitable[Any]]


class Scheduler:
    def __init__(self, run: JobFn, limit: int):
        if limit < 1:
            raise ValueError("the global limit must be at least 1")
        self.run = run
        self.limit = limit
        self.queues: dict[str, deque[Job]] = {}
        self.order: list[str] = []  # groups with queued jobs, in turn order
        self.cursor = 0
        self.group_caps: dict[str, int] = {}
        self.running: dict[str, tuple[Job, asyncio.Task, asyncio.Event]] = {}
        self.running_by_group: Counter[str] = Counter()
        self.running_by_key: Counter[str] = Counter()
        self.delayed: dict[str, asyncio.TimerHandle] = {}
        self.closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self.started_total = 0
        self.peak_running = 0

    # --- submitting ------------------------------------------------------------------------------

    def submit(self, jobs: list[Job], cap: int | None = None) -> None:
        """Queue jobs (in order) at the tail of their groups; ``cap`` limits the group(s)."""
        if self.closed:
            raise RuntimeError("scheduler is closed")
        for job in jobs:
            if cap is not None:
                self.group_caps[job.group_id] = cap
            self._enqueue(job, front=False)
        self._pump()

    def set_cap(self, group_id: str, cap: int | None) -> None:
        if cap is None:
            self.group_caps.pop(group_id, None)
        else:
            self.group_caps[group_id] = cap
        self._pump()

    def _enqueue(self, job: Job, front: bool) -> None:
        queue = self.queues.get(job.group_id)
        if queue is None:
            queue = self.queues[job.group_id] = deque()
            self.order.append(job.group_id)
        if front:
            queue.appendleft(job)
        else:
            queue.append(job)
        self._idle.clear()

    # --- cancelling ------------------------------------------------------------------------------

    def cancel_group(self, group_id: str) -> tuple[list[Job], list[Job]]:
        """Drop the group's queued (and delayed) jobs and signal its running ones to stop.
        Returns (dropped, signalled)."""
        dropped = list(self.queues.pop(group_id, ()))
        if group_id in self.order:
            index = self.order.index(group_id)
            self.order.pop(index)
            if index < self.cursor:
                self.cursor -= 1
        for job_id, handle in list(self.delayed.items()):
            job = handle._svc_job  # type: ignore[attr-defined]
            if job.group_id == group_id:
                handle.cancel()
                del self.delayed[job_id]
                dropped.append(job)
        signalled = []
        for job, _task, cancel in self.running.values():
            if job.group_id == group_id:
                cancel.set()
                signalled.append(job)
        self.group_caps.pop(group_id, None)
        self._check_idle()
        return dropped, signalled

    # --- introspection ---------------------------------------------------------------------------

    def queued_count(self, group_id: str | None = None) -> int:
        if group_id is None:
            return sum(len(q) for q in self.queues.values()) + len(self.delayed)
        delayed = sum(1 for h in self.delayed.values() if h._svc_job.group_id == group_id)  # type: ignore[attr-defined]
        return len(self.queues.get(group_id, ())) + delayed

    def running_count(self, group_id: str | None = None) -> int:
        return len(self.running) if group_id is None else self.running_by_group[group_id]

    def stats(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "running": len(self.running),
            "queued": self.queued_count(),
            "groups": len(self.order),
            "started_total": self.started_total,
            "peak_running": self.peak_running,
        }

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until nothing is queued, delayed or running."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    # --- dispatching -----------------------------------------------------------------------------

    def _eligible(self, job: Job) -> bool:
        cap = self.group_caps.get(job.group_id)
        if cap is not None and self.running_by_group[job.group_id] >= cap:
            return False
        if job.limit_key is not None and job.key_limit is not None and self.running_by_key[job.limit_key] >= job.key_limit:
            return False
        return True

    def _next(self) -> Job | None:
        # `cursor` is the position of the group whose turn it is; groups added later join the end
        # of the rotation, so a group that just ran goes after every group already waiting.
        count = len(self.order)
        for step in range(count):
            index = (self.cursor + step) % count
            group_id = self.order[index]
            queue = self.queues[group_id]
            if not self._eligible(queue[0]):
                continue
            job = queue.popleft()
            if queue:
                self.cursor = index + 1
            else:
                del self.queues[group_id]
                self.order.pop(index)
                self.cursor = index
            return job
        return None

    def _pump(self) -> None:
        if self.closed:
            return
        while len(self.running) < self.limit:
            job = self._next()
            if job is None:
                break
            self._start(job)
        self._check_idle()

    def _start(self, job: Job) -> None:
        cancel = asyncio.Event()
        task = asyncio.create_task(self._run(job, cancel), name=f"svc-job-{job.id}")
        self.running[job.id] = (job, task, cancel)
        self.running_by_group[job.group_id] += 1
        if job.limit_key is not None:
            self.running_by_key[job.limit_key] += 1
        self.started_total += 1
        self.peak_running = max(self.peak_running, len(self.running))

    async def _run(self, job: Job, cancel: asyncio.Event) -> None:
        outcome: Any = None
        try:
            outcome = await self.run(job, cancel)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("scenario job %s crashed", job.id)
        finally:
            self.running.pop(job.id, None)
            self._release(self.running_by_group, job.group_id)
            if job.limit_key is not None:
                self._release(self.running_by_key, job.limit_key)
        if isinstance(outcome, Requeue) and not self.closed and not cancel.is_set():
            self._delay(job, outcome.delay_s)
        self._pump()

    def _delay(self, job: Job, delay_s: float) -> None:
        def again() -> None:
            self.delayed.pop(job.id, None)
            if self.closed:
                return
            self._enqueue(job, front=True)
            self._pump()

        handle = asyncio.get_running_loop().call_later(max(0.0, delay_s), again)
        handle._svc_job = job  # type: ignore[attr-defined]
        self.delayed[job.id] = handle
        self._idle.clear()

    @staticmethod
    def _release(counter: Counter[str], key: str) -> None:
        counter[key] -= 1
        if counter[key] <= 0:
            del counter[key]

    def _check_idle(self) -> None:
        if not self.running and not self.queues and not self.delayed:
            self._idle.set()
        else:
            self._idle.clear()

    # --- shutdown --------------------------------------------------------------------------------

    async def close(self, grace_s: float = 5.0) -> list[Job]:
        """Stop dispatching, signal running jobs, wait up to ``grace_s``, then cancel them.
        Returns the jobs that were still running when the grace period ended."""
        self.closed = True
        for handle in self.delayed.values():
            handle.cancel()
        self.delayed.clear()
        self.queues.clear()
        self.order.clear()
        running = list(self.running.values())
        for _job, _task, cancel in running:
            cancel.set()
        tasks = [task for _job, task, _cancel in running]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        leftover = [job for job, task, _c in running if task.cancelled()]
        self._idle.set()
        return leftover
