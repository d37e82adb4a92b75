"""The job engine: one in-memory dispatcher for every unit of scenario work in the daemon.

A *job* is one scenario run. A *group* is what submitted it: a single run (``/v1/runs``), a replica
suite, or an experiment. What differs between those is a small plug-in object, the group *kind*
(:class:`GroupKind`), registered with the engine under its name and stored with each job
(``Job.kind``); the engine itself only knows jobs, groups, tenants and limits.

Limits, all checked before a job starts:

- the global limit (``SERVICE_MAX_CONCURRENT_RUNS``; default what the machine can hold:
  ``max(1, min(cpu_count, max_sandboxes // 2))``);
- a per-kind cap (``/v1/runs`` honours ``SERVICE_RUN_CONCURRENCY`` when it is set);
- the job's ``limit_key`` / ``key_limit``: a spec's ``resources.concurrency_limit``, shared by every
  run, experiment and suite running that spec (key ``<tenant>:<spec_id>``);
- the group's own cap (an experiment's ``concurrency``);
- the per-tenant cap (``SERVICE_MAX_RUNNING_PER_TENANT``; default half the global limit, at least
  1): jobs of one tenant running at once, whatever their kind, so one tenant's long runs never hold
  every slot while another tenant's runs wait (they stay queued, never refused);
- a per-kind, per-tenant cap (scoring: one job at a time *per tenant*, so one tenant's slow
  scoring does not hold back another tenant's).

Fairness is two-level round-robin: tenants take turns, and within a tenant its groups take turns,
so one tenant's hundred queued runs do not hold back another tenant's one run, and two experiments
of one tenant interleave instead of the second waiting for the first to drain. Within a group,
jobs start in order.

The engine is in memory; every job of every kind also has a row in the store (``scenario_jobs``,
:mod:`daemon.store.jobs`), and after a restart each kind applies the one recovery policy below to
its rows (:func:`recover_interrupted` for the jobs found running; the kind re-submits the queued). A job function may return
:class:`Requeue` to put the job back at the head of its group after :data:`RETRY_S` (the sandbox
pool is at capacity): the one retry delay of the daemon. Secrets sent with a group are held here,
in memory only (:meth:`JobEngine.hold_secrets`), until the group finishes.
"""
from __future__ import annotations

import asyncio
import logging
import os
from abc import ABC, abstractmethod
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Hashable, TypeVar

from aiohttp import web
from daemon.appkeys import SANDBOXES, SETTINGS
from daemon.store import jobs as job_store
from daemon.store.db import loads
from daemon.util import new_id, now_iso

if TYPE_CHECKING:
    import sqlite3

    from daemon.runner.concurrency import AdaptiveConcurrency

    from daemon.store.db import Store

log = logging.getLogger("svcd.engine")

RETRY_S = 2.0  # a job that found the sandbox pool full is tried again after this long
RESTART_ATTEMPTS = 2  # dispatches a job may have had when a restart finds it running and runs it again
K = TypeVar("K", bound=Hashable)
ENGINE_KEY: web.AppKey[JobEngine] = web.AppKey("job_engine")


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
    tenant: str = ""
    kind: str = ""


@dataclass
class Requeue:
    """Returned by a job function: run this job again later (it did not really start)."""

    delay_s: float = RETRY_S
    reason: str = ""


JobFn = Callable[[Job, asyncio.Event], Awaitable[Any]]


class GroupKind(ABC):
    """What the engine needs from a kind of group (run, suite, experiment).

    ``run_job`` runs one job (it may return :class:`Requeue`); ``job_finished`` and
    ``group_finished`` are the completion hooks (streams, webhooks, aggregates); ``describe`` is the
    group's public body (what the API answers for it); ``recover`` re-submits what the store says is
    queued after a restart; ``rerun_interrupted`` / ``give_up_interrupted`` apply the recovery policy
    to one job row found running."""

    name = ""
    restart_attempts = RESTART_ATTEMPTS

    @abstractmethod
    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any: ...

    async def job_finished(self, group_id: str, job_id: str) -> None:
        return None

    async def group_finished(self, group_id: str) -> None:
        return None

    async def describe(self, group_id: str) -> dict[str, Any] | None:
        """The group's public body (None when there is no such group)."""
        return None

    async def describe_many(self, group_ids: list[str]) -> list[dict[str, Any]]:
        """Bodies of a listing page, in order (a kind may answer them in one query)."""
        bodies = [await self.describe(group_id) for group_id in group_ids]
        return [body for body in bodies if body is not None]

    async def recover(self) -> None:
        return None

    async def rerun_interrupted(self, store: Store, row: sqlite3.Row) -> None:
        """Queued again under a fresh run id (the seed stays, so it is the same replica)."""
        previous = loads(row["previous_run_ids"], []) + [row["run_id"]]
        await job_store.retry(store, row["id"], new_id("run_"), previous, now_iso())

    async def give_up_interrupted(self, store: Store, row: sqlite3.Row, message: str) -> None:
        await job_store.finish(store, row["id"], state="done", status="errored", score=None, error=message, result=None,
                               wall_ms=None, cost_usd=None, now=now_iso())


def auto_tenant_cap(limit: int) -> int:
    """The default per-tenant cap: half the global limit, at least 1."""
    return max(1, limit // 2)


class Scheduler:
    def __init__(self, run: JobFn, limit: int, tenant_cap: int | None = None):
        if limit < 1:
            raise ValueError("the global limit must be at least 1")
        self.run = run
        self.limit = limit
        self.tenant_cap = tenant_cap  # jobs one tenant may have running (None: no cap)
        # The cap keeps room for other tenants; a daemon with one tenant (one user's machine) lets it
        # use every slot. Set from the store at start and when a tenant is created (api/keys.py).
        self.several_tenants = True
        self.running_by_tenant: Counter[str] = Counter()
        self.kind_tenant_caps: dict[str, int] = {}
        self.running_by_kind_tenant: Counter[tuple[str, str]] = Counter()
        self.queues: dict[str, deque[Job]] = {}
        self.tenants: list[str] = []  # tenants with queued jobs, in turn order
        self.tenant_cursor = 0
        self.groups_of: dict[str, list[str]] = {}  # tenant -> its groups with queued jobs, in turn order
        self.group_cursor: dict[str, int] = {}
        self.tenant_of: dict[str, str] = {}
        self.group_caps: dict[str, int] = {}
        self.kind_caps: dict[str, int] = {}
        self.running: dict[str, tuple[Job, asyncio.Task[None], asyncio.Event]] = {}
        self.running_by_group: Counter[str] = Counter()
        self.running_by_key: Counter[str] = Counter()
        self.running_by_kind: Counter[str] = Counter()
        self.delayed: dict[str, asyncio.TimerHandle] = {}
        self.delayed_jobs: dict[str, Job] = {}  # a TimerHandle has __slots__: the job is kept beside it
        self.closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self.started_total = 0
        self.peak_running = 0

    @property
    def order(self) -> list[str]:
        """Groups with queued jobs (tenant by tenant)."""
        return [g for t in self.tenants for g in self.groups_of.get(t, ())]

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

    def set_limit(self, limit: int) -> None:
        """A new global limit (a swarm's nodes came or went); jobs running above it finish first."""
        self.limit = max(1, limit)
        self._pump()

    def set_tenant_cap(self, cap: int | None) -> None:
        self.tenant_cap = None if cap is None else max(1, cap)
        self._pump()

    def set_kind_tenant_cap(self, kind: str, cap: int | None) -> None:
        """At most `cap` jobs of `kind` running per tenant (each tenant has its own)."""
        if cap is None:
            self.kind_tenant_caps.pop(kind, None)
        else:
            self.kind_tenant_caps[kind] = cap
        self._pump()

    def set_kind_cap(self, kind: str, cap: int | None) -> None:
        if cap is None:
            self.kind_caps.pop(kind, None)
        else:
            self.kind_caps[kind] = cap
        self._pump()

    def _enqueue(self, job: Job, front: bool) -> None:
        queue = self.queues.get(job.group_id)
        if queue is None:
            queue = self.queues[job.group_id] = deque()
            tenant = job.tenant
            self.tenant_of[job.group_id] = tenant
            if tenant not in self.groups_of:
                self.groups_of[tenant] = []
                self.tenants.append(tenant)
            self.groups_of[tenant].append(job.group_id)
        if front:
            queue.appendleft(job)
        else:
            queue.append(job)
        self._idle.clear()

    def _unlink(self, group_id: str, index: int | None = None) -> None:
        """Remove a group (its queue already gone) from the rotation."""
        tenant = self.tenant_of.pop(group_id, None)
        if tenant is None:
            return
        groups = self.groups_of[tenant]
        if index is None:
            index = groups.index(group_id)
        groups.pop(index)
        if index < self.group_cursor.get(tenant, 0):
            self.group_cursor[tenant] -= 1
        if not groups:
            del self.groups_of[tenant]
            self.group_cursor.pop(tenant, None)
            t_index = self.tenants.index(tenant)
            self.tenants.pop(t_index)
            if t_index < self.tenant_cursor:
                self.tenant_cursor -= 1

    # --- cancelling ------------------------------------------------------------------------------

    def cancel_group(self, group_id: str) -> tuple[list[Job], list[Job]]:
        """Drop the group's queued (and delayed) jobs and signal its running ones to stop.
        Returns (dropped, signalled)."""
        dropped = list(self.queues.pop(group_id, ()))
        self._unlink(group_id)
        for job_id, handle in list(self.delayed.items()):
            job = self.delayed_jobs[job_id]
            if job.group_id == group_id:
                handle.cancel()
                del self.delayed[job_id]
                del self.delayed_jobs[job_id]
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
        delayed = sum(1 for job in self.delayed_jobs.values() if job.group_id == group_id)
        return len(self.queues.get(group_id, ())) + delayed

    def running_count(self, group_id: str | None = None) -> int:
        return len(self.running) if group_id is None else self.running_by_group[group_id]

    def stats(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "running": len(self.running),
            "queued": self.queued_count(),
            "groups": len(self.queues),
            "tenants": len(self.tenants),
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
        kind_cap = self.kind_caps.get(job.kind)
        if kind_cap is not None and self.running_by_kind[job.kind] >= kind_cap:
            return False
        if job.limit_key is not None and job.key_limit is not None and self.running_by_key[job.limit_key] >= job.key_limit:
            return False
        if (self.tenant_cap is not None and self.several_tenants
                and self.running_by_tenant[job.tenant] >= self.tenant_cap):
            return False
        kind_tenant_cap = self.kind_tenant_caps.get(job.kind)
        if kind_tenant_cap is not None and self.running_by_kind_tenant[(job.kind, job.tenant)] >= kind_tenant_cap:
            return False
        return True

    def _next(self) -> Job | None:
        # A cursor names whose turn it is; tenants (and a tenant's groups) added later join the end
        # of the rotation, so one that just ran goes after every one already waiting.
        tenant_count = len(self.tenants)
        for t_step in range(tenant_count):
            t_index = (self.tenant_cursor + t_step) % tenant_count
            tenant = self.tenants[t_index]
            groups = self.groups_of[tenant]
            count = len(groups)
            start = self.group_cursor.get(tenant, 0)
            for step in range(count):
                index = (start + step) % count
                group_id = groups[index]
                queue = self.queues[group_id]
                if not self._eligible(queue[0]):
                    continue
                job = queue.popleft()
                if queue:
                    self.group_cursor[tenant] = index + 1
                else:
                    del self.queues[group_id]
                    del self.tenant_of[group_id]
                    groups.pop(index)
                    self.group_cursor[tenant] = index
                if groups:
                    self.tenant_cursor = t_index + 1
                else:
                    del self.groups_of[tenant]
                    self.group_cursor.pop(tenant, None)
                    self.tenants.pop(t_index)
                    self.tenant_cursor = t_index
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
        self.running_by_kind[job.kind] += 1
        self.running_by_tenant[job.tenant] += 1
        self.running_by_kind_tenant[(job.kind, job.tenant)] += 1
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
            log.exception("job %s crashed", job.id)
        finally:
            self.running.pop(job.id, None)
            self._release(self.running_by_group, job.group_id)
            self._release(self.running_by_kind, job.kind)
            self._release(self.running_by_tenant, job.tenant)
            self._release(self.running_by_kind_tenant, (job.kind, job.tenant))
            if job.limit_key is not None:
                self._release(self.running_by_key, job.limit_key)
        if isinstance(outcome, Requeue) and not self.closed and not cancel.is_set():
            self._delay(job, outcome.delay_s)
        self._pump()

    def _delay(self, job: Job, delay_s: float) -> None:
        def again() -> None:
            self.delayed.pop(job.id, None)
            self.delayed_jobs.pop(job.id, None)
            if self.closed:
                return
            self._enqueue(job, front=True)
            self._pump()

        handle = asyncio.get_running_loop().call_later(max(0.0, delay_s), again)
        self.delayed[job.id] = handle
        self.delayed_jobs[job.id] = job
        self._idle.clear()

    def is_delayed(self, job_id: str) -> bool:
        return job_id in self.delayed

    @staticmethod
    def _release(counter: Counter[K], key: K) -> None:
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
        self.delayed_jobs.clear()
        self.queues.clear()
        self.tenants.clear()
        self.groups_of.clear()
        self.group_cursor.clear()
        self.tenant_of.clear()
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


class JobEngine:
    """The daemon's one engine: a :class:`Scheduler` dispatching to the registered kinds, the
    in-memory secrets of queued groups, and a shared lifetime (the last service to release it
    closes it)."""

    # the global limit follows the host when nobody fixed it (daemon/runner/concurrency.py)
    concurrency: AdaptiveConcurrency | None = None

    def __init__(self, limit: int, grace_s: float = 10.0, tenant_cap: int | None = None):
        self.kinds: dict[str, GroupKind] = {}
        self.scheduler = Scheduler(self._dispatch, limit, tenant_cap)
        self.secrets: dict[str, dict[str, str]] = {}
        self.grace_s = grace_s
        self._holders: set[str] = set()
        # called with every submitted batch, after it is queued (the sandbox pool prewarms their
        # shapes: daemon/sandbox/prewarm.py); a hook must not block or raise
        self.queue_hooks: list[Callable[[list[Job]], None]] = []

    @property
    def limit(self) -> int:
        return self.scheduler.limit

    def register(self, kind: GroupKind) -> None:
        self.kinds[kind.name] = kind

    def kind(self, name: str) -> GroupKind:
        return self.kinds[name]

    async def describe(self, kind: str, group_id: str) -> dict[str, Any] | None:
        """How the API answers for a group: whatever its kind says."""
        return await self.kinds[kind].describe(group_id)

    async def describe_many(self, kind: str, group_ids: list[str]) -> list[dict[str, Any]]:
        return await self.kinds[kind].describe_many(group_ids)

    async def _dispatch(self, job: Job, cancel: asyncio.Event) -> Any:
        kind = self.kinds.get(job.kind)
        if kind is None:
            log.error("job %s has unknown kind %r", job.id, job.kind)
            return None
        return await kind.run_job(job, cancel)

    def submit(self, jobs: list[Job], cap: int | None = None) -> None:
        self.scheduler.submit(jobs, cap=cap)
        for hook in self.queue_hooks:
            try:
                hook(jobs)
            except Exception:
                log.exception("a queue hook failed")

    # --- secrets (memory only) -------------------------------------------------------------------

    def hold_secrets(self, group_id: str, secrets: dict[str, str] | None) -> None:
        if secrets:
            self.secrets[group_id] = dict(secrets)

    def secrets_of(self, group_id: str) -> dict[str, str] | None:
        return self.secrets.get(group_id)

    def drop_secrets(self, group_id: str) -> None:
        self.secrets.pop(group_id, None)

    # --- lifetime --------------------------------------------------------------------------------

    def acquire(self, holder: str) -> None:
        self._holders.add(holder)

    async def release(self, holder: str) -> None:
        if holder not in self._holders:
            return
        self._holders.discard(holder)
        if not self._holders and not self.scheduler.closed:
            await self.scheduler.close(self.grace_s)


# --- the one recovery policy ---------------------------------------------------------------------
#
# After a restart (graceful or SIGKILL) each kind reads what its store says was queued or running
# and applies the same rules:
#
# - a job found *running* was interrupted: it runs again (same seed) while it has had fewer than
#   its kind's ``restart_attempts`` dispatches, else it ends ``errored`` with reason
#   ``daemon_restart``. A single ``/v1/runs`` run has ``restart_attempts = 1``: its run id is the
#   caller's handle, so it is never silently run twice (``POST /v1/runs/{id}/replay`` does that);
# - a *queued* job is queued again, in its original order;
# - a job whose group was sent secrets that this process no longer holds (values live in memory
#   only) ends ``errored``, naming them;
# - a group whose jobs are all finished is finalized.


def retry_interrupted(attempts: int, restart_attempts: int) -> bool:
    """Whether a job found running after a restart runs again (see the policy above)."""
    return attempts < restart_attempts


async def recover_interrupted(store: Store, kind: GroupKind) -> int:
    """The policy's first rule for one kind: each of its jobs the store says is running was
    interrupted; it runs again or is given up. Returns how many there were."""
    rows = await job_store.running(store, kind.name)
    for row in rows:
        if retry_interrupted(row["attempts"], kind.restart_attempts):
            await kind.rerun_interrupted(store, row)
        else:
            times = "once" if row["attempts"] <= 1 else f"{row['attempts']} times"
            await kind.give_up_interrupted(store, row, f"daemon_restart: the daemon stopped while this run was running ({times});"
                                                       " not run again")
    return len(rows)


def missing_secrets(engine: "JobEngine", group_id: str, names: list[str]) -> list[str]:
    """Secret names sent with the group that the engine no longer holds (lost in a restart)."""
    held = engine.secrets_of(group_id) or {}
    return [name for name in names if name not in held]


def engine_of(app: web.Application) -> JobEngine:
    """The app's engine, created on first use (by whichever service starts first)."""
    engine = app.get(ENGINE_KEY) if hasattr(app, "get") else None
    if engine is None:
        settings = app[SETTINGS]
        limit = default_global_limit(settings.max_sandboxes)
        sandboxes = app.get(SANDBOXES)  # made before the services that need the engine (API_MODULES order)
        follow = None
        if sandboxes is not None and not os.environ.get("SERVICE_MAX_CONCURRENT_RUNS", "").strip():
            limit = sandboxes.driver.concurrency(limit, settings.max_sandboxes)  # a swarm: what its nodes hold
            follow = getattr(sandboxes.driver, "follow_capacity", None)  # ... as nodes come and go
        fixed_cap = getattr(settings, "max_running_per_tenant", 0) or 0
        engine = JobEngine(limit, tenant_cap=fixed_cap if fixed_cap > 0 else auto_tenant_cap(limit))
        app[ENGINE_KEY] = engine

        def set_limit(new_limit: int) -> None:
            engine.scheduler.set_limit(new_limit)
            if fixed_cap <= 0:  # the default cap follows the global limit
                engine.scheduler.set_tenant_cap(auto_tenant_cap(new_limit))

        if follow is not None:
            follow(limit, settings.max_sandboxes, set_limit)
        elif sandboxes is not None and not os.environ.get("SERVICE_MAX_CONCURRENT_RUNS", "").strip():
            from daemon.runner.concurrency import AdaptiveConcurrency, host_bounds

            _, ceiling = host_bounds(settings.max_sandboxes)
            engine.concurrency = AdaptiveConcurrency(limit, ceiling, set_limit)
    return engine
