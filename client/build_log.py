"""The image builds of an experiment's sandboxes, as lines for `svc eval run`'s progress: each run's
sandbox lifecycle stream is followed while it boots, and its `status {step: image}` events (a
Dockerfile base's build log, then `built`) are handed to `emit`. Nothing is followed for a spec whose
base is an image reference (its sandboxes have no such events and are left at their first other step).
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from client.routes import R

BOOTING = ("queued", "running")


def builds_image(spec_yaml: str | None) -> bool:
    """Whether a spec's base is a Dockerfile build (its runs' boots have a build log to show)."""
    import yaml

    try:
        doc = yaml.safe_load(spec_yaml or "")
    except yaml.YAMLError:
        return False
    return isinstance(doc, dict) and isinstance(doc.get("base"), dict)


async def follow_builds(client: Any, experiment_id: str, emit: Callable[[str], None], poll_s: float = 1.0) -> None:
    """Runs until cancelled."""
    followed: dict[str, asyncio.Task] = {}
    try:
        while True:
            try:
                async for run in client.pages(R.LIST_RUNS, query={"experiment_id": experiment_id}):
                    sandbox = run.get("sandbox_id")
                    if sandbox and sandbox not in followed and run.get("status") in BOOTING:
                        followed[sandbox] = asyncio.create_task(_follow(client, sandbox, emit))
            except Exception:
                pass  # the progress must never stop the experiment's wait
            await asyncio.sleep(poll_s)
    finally:
        for task in followed.values():
            task.cancel()
        await asyncio.gather(*followed.values(), return_exceptions=True)


async def _follow(client: Any, sandbox_id: str, emit: Callable[[str], None]) -> None:
    try:
        async for event in client.stream(R.SANDBOX_EVENTS, sandbox_id=sandbox_id):
            if not isinstance(event, dict) or event.get("event_type") != "status":
                continue
            data = event.get("data") or {}
            if data.get("step") == "secrets_resolved":
                continue  # the one step before the image's
            if data.get("step") != "image":
                return  # past the image step: the build (if any) is over
            if "line" in data:
                emit(f"{sandbox_id}: build: {data['line']}")
            elif data.get("building"):
                emit(f"{sandbox_id}: building {data.get('image')}")
            elif "built" in data:
                emit(f"{sandbox_id}: image {data.get('image')} " + ("built" if data["built"] else "already built"))
                return
    except asyncio.CancelledError:
        raise
    except Exception:
        return
