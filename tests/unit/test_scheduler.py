"""The scenario scheduler: global limit, per-spec limit, per-group cap, round-robin fairness,
requeue, cancel, shutdown. The job function is the scheduler's own seam: tiny in-process jobs."""
from __future__ import annotations

import asyncio

import pytest

from daemon.runner.engine import Job, Requeue, Scheduler, default_global_limit


class Recorder:
    """A job function that records start order and concurrency, and holds each job until released
    (or for `duration` seconds)."""

    def __init__(self, duration: float | None = 0.01):
        self.duration = duration
        self.started: list[str] = []
        self.finished: list[str] = []
        self.running: set[str] = set()
        self.peak = 0
        self.peak_by_key: dict[str, int] = {}
        self.running_by_key: dict[str, int] = {}
        self.cancelled: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, job: Job, cancel: asyncio.Event):
        self.started.append(job.id)
        self.running.add(job.id)
        self.peak = max(self.peak, len(self.running))
        key = job.limit_key or "-"
        self.running_by_key[key] = self.running_by_key.get(key, 0) + 1
        self.peak_by_key[key] = max(self.peak_by_key.get(key, 0), self.running_by_key[key])
        try:
            waiter = asyncio.ensure_future(cancel.wait())
            other = asyncio.ensure_future(asyncio.sleep(self.duration) if self.duration is not None else self.release.wait())
            done, pending = await asyncio.wait({waiter, other}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            if waiter in done:
                self.cancelled.append(job.id)
        finally:
            self.running.discard(job.id)
            self.running_by_key[key] -= 1
            self.finished.append(job.id)


def jobs(group: str, n: int, key: str | None = None, key_limit: int | None = None) -> list[Job]:
    return [Job(id=f"{group}-{i}", group_id=group, limit_key=key, key_limit=key_limit) for i in range(n)]


async def test_global_limit_is_never_exceeded_and_everything_runs():
    rec = Recorder(0.005)
    sched = Scheduler(rec, limit=3)
    sched.submit(jobs("a", 20))
    await sched.wait_idle(5)
    assert rec.peak == 3
    assert sorted(rec.finished) == sorted(j.id for j in jobs("a", 20))
    assert sched.stats()["started_total"] == 20


async def test_round_robin_between_groups():
    rec = Recorder(0.001)
    sched = Scheduler(rec, limit=1)
    sched.submit(jobs("a", 4))
    sched.submit(jobs("b", 4))
    sched.submit(jobs("c", 2))
    await sched.wait_idle(5)
    # With one slot, a started first (submitted first); then the turns rotate a, b, c.
    assert rec.started == ["a-0", "b-0", "c-0", "a-1", "b-1", "c-1", "a-2", "b-2", "a-3", "b-3"]


async def test_a_late_group_does_not_wait_for_an_earlier_one_to_drain():
    rec = Recorder(0.002)
    sched = Scheduler(rec, limit=2)
    sched.submit(jobs("big", 50))
    await asyncio.sleep(0.01)
    sched.submit(jobs("small", 3))
    await sched.wait_idle(10)
    last_small = max(rec.started.index(f"small-{i}") for i in range(3))
    # small's three jobs start within a few dispatches of its arrival, not after big's 50.
    first_small = rec.started.index("small-0")
    assert last_small - first_small <= 6
    assert last_small < 30


async def test_per_spec_key_limit_is_shared_across_groups():
    rec = Recorder(0.003)
    sched = Scheduler(rec, limit=8)
    sched.submit(jobs("a", 6, key="t:spec", key_limit=2))
    sched.submit(jobs("b", 6, key="t:spec", key_limit=2))
    sched.submit(jobs("c", 6, key="t:other", key_limit=None))
    await sched.wait_idle(5)
    assert rec.peak_by_key["t:spec"] == 2
    assert rec.peak_by_key["t:other"] >= 3  # not limited by the other spec
    assert len(rec.finished) == 18


async def test_group_cap_limits_one_experiment_only():
    rec = Recorder(0.003)
    sched = Scheduler(rec, limit=6)
    sched.submit(jobs("capped", 8), cap=1)
    sched.submit(jobs("free", 8))
    running_capped = []

    async def sample():
        while rec.finished.__len__() < 16:
            running_capped.append(sum(1 for j in rec.running if j.startswith("capped")))
            await asyncio.sleep(0.0005)

    sampler = asyncio.create_task(sample())
    await sched.wait_idle(5)
    await sampler
    assert max(running_capped) == 1
    assert rec.peak >= 3


async def test_a_blocked_group_does_not_block_others():
    rec = Recorder(None)  # held until released
    sched = Scheduler(rec, limit=4)
    sched.submit(jobs("a", 3, key="k", key_limit=1))
    sched.submit(jobs("b", 2))
    await asyncio.sleep(0.01)
    assert sorted(rec.running) == ["a-0", "b-0", "b-1"]
    rec.release.set()
    await sched.wait_idle(5)
    assert len(rec.finished) == 5


async def test_requeue_puts_the_job_back_at_the_head_after_a_delay():
    attempts: dict[str, int] = {}
    order: list[str] = []

    async def flaky_capacity(job: Job, cancel: asyncio.Event):
        attempts[job.id] = attempts.get(job.id, 0) + 1
        if job.id == "a-0" and attempts[job.id] < 3:
            return Requeue(0.01, "at capacity")
        order.append(job.id)

    sched = Scheduler(flaky_capacity, limit=1)
    sched.submit(jobs("a", 3))
    await sched.wait_idle(5)
    assert attempts["a-0"] == 3
    assert sorted(order) == ["a-0", "a-1", "a-2"]


async def test_cancel_group_drops_queued_and_signals_running():
    rec = Recorder(None)
    sched = Scheduler(rec, limit=2)
    sched.submit(jobs("a", 5) + jobs("b", 1))  # one submit: a-0 and b-0 take the two slots
    await asyncio.sleep(0.01)
    dropped, signalled = sched.cancel_group("a")
    assert [j.id for j in signalled] == ["a-0"]
    assert sorted(j.id for j in dropped) == ["a-1", "a-2", "a-3", "a-4"]
    await asyncio.sleep(0.01)
    assert "a-0" in rec.cancelled
    rec.release.set()
    await sched.wait_idle(5)
    assert not any(j.startswith("a-") and j != "a-0" for j in rec.started)
    assert "b-0" in rec.finished


async def test_a_crashing_job_does_not_stop_the_queue():
    ran = []

    async def job_fn(job: Job, cancel: asyncio.Event):
        ran.append(job.id)
        if job.id == "a-1":
            raise RuntimeError("boom")

    sched = Scheduler(job_fn, limit=1)
    sched.submit(jobs("a", 3))
    await sched.wait_idle(5)
    assert ran == ["a-0", "a-1", "a-2"]
    assert sched.running_count() == 0


async def test_close_signals_then_cancels_stragglers():
    started = asyncio.Event()

    async def stubborn(job: Job, cancel: asyncio.Event):
        started.set()
        await asyncio.sleep(30)  # ignores the cancel event

    sched = Scheduler(stubborn, limit=1)
    sched.submit(jobs("a", 2))
    await started.wait()
    leftover = await sched.close(grace_s=0.05)
    assert [j.id for j in leftover] == ["a-0"]
    with pytest.raises(RuntimeError):
        sched.submit(jobs("b", 1))


def test_default_global_limit(monkeypatch):
    monkeypatch.delenv("SERVICE_MAX_CONCURRENT_RUNS", raising=False)
    assert 1 <= default_global_limit(16) <= 8
    assert default_global_limit(1) == 1
    monkeypatch.setenv("SERVICE_MAX_CONCURRENT_RUNS", "5")
    assert default_global_limit(16) == 5
    monkeypatch.setenv("SERVICE_MAX_CONCURRENT_RUNS", "zero")
    with pytest.raises(SystemExit):
        default_global_limit(16)
