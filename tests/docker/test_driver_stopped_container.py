"""The engine driver on a container its agent stopped: asking how many processes the OOM killer ended
there (after an exit 137) answers "unknown" instead of raising, so an agent that stops its own
container fails its run (`agent_stopped_container`) rather than erroring it with the engine's 409."""
from __future__ import annotations

import pytest

from daemon.sandbox.engine.docker import DockerDriver
from tests.support.images import PYTHON

pytestmark = pytest.mark.asyncio


async def test_the_oom_count_of_a_stopped_container_is_unknown(docker_client):
    container = docker_client.containers.run(PYTHON, ["sleep", "300"], detach=True, labels={"svc.test": "oom-count"})
    driver = DockerDriver(max_workers=2)
    try:
        container.kill()
        container.wait(timeout=30)
        assert await driver.oom_kill_count(container.id) is None
    finally:
        container.remove(force=True)
