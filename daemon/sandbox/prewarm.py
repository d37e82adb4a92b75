"""Prewarming the warm pool (pool.py) for the job engine's queue: when jobs are queued, the shape
each one's sandbox will have is computed the way the runner will ask for it (the run's stored spec
version, its agent's bundle and egress) and that shape is filled before the jobs start.

`queue_hook(app, manager)` is registered on the engine (`JobEngine.queue_hooks`) by the sandboxes
API module; it runs in the background and never fails a submit.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from aiohttp import web

    from daemon.sandbox.manager import SandboxManager

log = logging.getLogger("svcd.sandbox.pool")

MAX_SPECS_PER_SUBMIT = 16  # distinct spec versions looked up for one submit


def queue_hook(app: "web.Application", manager: "SandboxManager") -> Callable[[list[Any]], None]:
    def hook(jobs: list[Any]) -> None:
        if jobs and manager.pool.enabled:
            manager.spawn(prewarm_jobs(app, manager, list(jobs)))

    return hook


async def prewarm_jobs(app: "web.Application", manager: "SandboxManager", jobs: list[Any]) -> None:
    from daemon.runner.agent import resolve
    from daemon.spec import load_spec
    from daemon.store import jobs as job_store
    from daemon.store import runs as run_store
    from daemon.store import specs as spec_store

    seen: set[tuple[str, str, int]] = set()
    try:
        for job in jobs:
            job_row = await job_store.get(manager.store, job.id)
            run = await run_store.get(manager.store, job_row["run_id"] if job_row is not None else job.id)
            if run is None or run.sandbox_id and not run.own_sandbox:
                continue  # not stored yet, or it runs in a sandbox it was given
            ref = (run.tenant_id, run.spec_id, run.spec_version)
            if ref in seen:
                continue
            seen.add(ref)
            if len(seen) > MAX_SPECS_PER_SUBMIT:
                return
            record = await spec_store.get(manager.store, *ref)
            if record is None:
                continue
            spec = load_spec(record["yaml"], f"{record['id']}.yaml")
            agent = await resolve(app, ref[0], spec)
            await manager.prewarm(ref[0], spec, ref[1], ref[2], agent.bundle is not None, agent.egress or None,
                                  agent.base_image)
    except Exception as exc:  # prewarming is best effort: the run boots cold and reports its own errors
        log.info("prewarming the pool for queued jobs failed: %s", str(exc).splitlines()[0][:300] if str(exc) else exc)
