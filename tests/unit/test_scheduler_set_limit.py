"""The scheduler's global limit changes while it runs (a swarm's nodes come and go): a raised limit
starts queued jobs at once."""
from __future__ import annotations

import asyncio

from daemon.runner.engine import Job, Scheduler


async def test_raised_limit_starts_queued_jobs_without_waiting_for_running_ones():
    release = asyncio.Event()
    started: list[str] = []

    async def run(job: Job, cancel: asyncio.Event):
        started.append(job.id)
        await release.wait()

    sched = Scheduler(run, 1)
    sched.submit([Job(id=f"j{i}", group_id=f"g{i}", tenant="A") for i in range(3)])
    await asyncio.sleep(0)
    sched.set_limit(3)
    await asyncio.sleep(0)
    try:
        assert sorted(started) == ["j0", "j1", "j2"]
    finally:
        release.set()
        await sched.wait_idle(5)
