"""The job engine's scheduler beyond the experiment cases of test_scheduler.py: tenants take turns
before groups do, kind caps, the engine's kinds and secrets."""
from __future__ import annotations

import asyncio

from daemon.runner.engine import GroupKind, Job, JobEngine, Scheduler, missing_secrets, retry_interrupted


async def _drain(order: list[str], limit: int, submit) -> None:
    release = asyncio.Event()

    async def run(job: Job, cancel: asyncio.Event):
        order.append(job.id)
        await release.wait()

    sched = Scheduler(run, limit)
    submit(sched)
    release.set()
    await sched.wait_idle(5)


async def test_tenants_take_turns_before_groups():
    order: list[str] = []

    def submit(sched: Scheduler) -> None:
        # tenant A: three single-job groups (three runs) and a two-job group; tenant B: one run
        sched.submit([Job(id="blocker", group_id="g0", tenant="A")])
        for i in range(3):
            sched.submit([Job(id=f"a{i}", group_id=f"ga{i}", tenant="A")])
        sched.submit([Job(id="s0", group_id="suite", tenant="A"), Job(id="s1", group_id="suite", tenant="A")])
        sched.submit([Job(id="b0", group_id="gb", tenant="B")])

    await _drain(order, 1, submit)
    assert order[0] == "blocker"
    assert order.index("b0") <= 2, order  # B waits for at most one of A's jobs
    a_only = [j for j in order if j.startswith("a")]
    assert a_only == ["a0", "a1", "a2"]  # a tenant's runs keep their order
    assert order.index("s1") > order.index("s0")


async def test_kind_cap_limits_one_kind_only():
    running: dict[str, int] = {"run": 0, "suite": 0}
    peak: dict[str, int] = {"run": 0, "suite": 0}

    async def run(job: Job, cancel: asyncio.Event):
        running[job.kind] += 1
        peak[job.kind] = max(peak[job.kind], running[job.kind])
        await asyncio.sleep(0.01)
        running[job.kind] -= 1

    sched = Scheduler(run, 8)
    sched.set_kind_cap("run", 1)
    sched.submit([Job(id=f"r{i}", group_id=f"r{i}", kind="run") for i in range(4)])
    sched.submit([Job(id=f"s{i}", group_id="s", kind="suite") for i in range(4)])
    await sched.wait_idle(5)
    assert peak == {"run": 1, "suite": 4}


async def test_spec_limit_is_shared_by_every_kind():
    running = 0
    peak = 0

    async def run(job: Job, cancel: asyncio.Event):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    sched = Scheduler(run, 8)
    sched.submit([Job(id=f"r{i}", group_id=f"r{i}", kind="run", limit_key="t:spec", key_limit=2) for i in range(3)])
    sched.submit([Job(id=f"e{i}", group_id="exp", kind="experiment", limit_key="t:spec", key_limit=2) for i in range(3)])
    await sched.wait_idle(5)
    assert peak == 2


async def test_engine_dispatches_by_kind_and_holds_secrets():
    seen: list[tuple[str, str]] = []

    class Kind(GroupKind):
        def __init__(self, name: str):
            self.name = name

        async def run_job(self, job: Job, cancel: asyncio.Event):
            seen.append((self.name, job.id))

    engine = JobEngine(2)
    engine.register(Kind("run"))
    engine.register(Kind("suite"))
    engine.hold_secrets("g", {"A": "1"})
    assert missing_secrets(engine, "g", ["A", "B"]) == ["B"]
    engine.submit([Job(id="x", group_id="x", kind="run"), Job(id="y", group_id="g", kind="suite")])
    await engine.scheduler.wait_idle(5)
    assert sorted(seen) == [("run", "x"), ("suite", "y")]
    engine.acquire("a")
    engine.acquire("b")
    await engine.release("a")
    assert not engine.scheduler.closed
    await engine.release("b")
    assert engine.scheduler.closed
    engine.drop_secrets("g")
    assert engine.secrets_of("g") is None


def test_recovery_policy():
    assert retry_interrupted(1, 2) and not retry_interrupted(2, 2)
    assert not retry_interrupted(1, 1)  # single runs are never re-run silently
