"""Waiting for a run's sandbox to be released: runs destroy their sandbox after the verdict is
stored, in the background, so the run can be finished a moment before its containers are gone."""
from __future__ import annotations

import asyncio
import time

from tests.support.engine import assert_released, labelled


async def released_soon(docker_client, sandbox_id: str, timeout: float = 60) -> None:
    """Passes once nothing labelled with the sandbox is left; fails like assert_released after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        containers, networks = await asyncio.to_thread(labelled, docker_client, sandbox=sandbox_id)
        if not containers and not networks:
            return
        await asyncio.sleep(0.2)
    assert_released(docker_client, sandbox_id)


async def torn_down_soon(manager, sandbox_id: str, timeout: float = 60) -> None:
    """Returns once the daemon has torn the sandbox down (it is no longer live); fails after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while manager.runtime(sandbox_id) is not None:
        assert time.monotonic() < deadline, f"sandbox {sandbox_id} still live after {timeout:g}s"
        await asyncio.sleep(0.1)
