"""An exec whose engine goes away under it is reported as the engine's loss (`stream_broken`), however
the connection ended: a restarting engine (or a socket proxy in front of it) closes the exec stream
cleanly, at a frame boundary, so the stream alone looks like a command that ended. What tells them
apart is the engine's own answer afterwards: a command that ended has an exit code the engine can
report; an engine that is gone cannot report one. The experiment service retries a run whose agent
lost its engine (tests/docker/test_engine_loss.py); without this, such a run was scored `failed`."""
from __future__ import annotations

import asyncio

import pytest

from daemon.sandbox.engine.docker import DockerDriver
from tests.support.engine_proxy import EngineProxy
from tests.support.images import PYTHON

pytestmark = pytest.mark.asyncio


async def test_an_exec_cut_off_by_the_engine_going_away_is_the_engines_loss(docker_client, tmp_path):
    container = docker_client.containers.run(PYTHON, ["sleep", "300"], detach=True, labels={"svc.test": "exec-lost"})
    proxy = await EngineProxy.start(tmp_path / "docker.sock")
    driver = DockerDriver(max_workers=2, base_url=proxy.url)
    try:
        running = asyncio.ensure_future(driver.exec(container.id, ["sleep", "20"]))
        await asyncio.sleep(1.5)
        await proxy.cut()
        raw = await asyncio.wait_for(running, 15)
        assert (raw.exit_code, raw.stream_broken) == (None, True)
    finally:
        proxy.restore()
        await proxy.close()
        container.remove(force=True)


async def test_an_exec_that_ends_while_the_engine_answers_is_not_a_loss(docker_client, tmp_path):
    container = docker_client.containers.run(PYTHON, ["sleep", "300"], detach=True, labels={"svc.test": "exec-lost"})
    proxy = await EngineProxy.start(tmp_path / "docker.sock")
    driver = DockerDriver(max_workers=2, base_url=proxy.url)
    try:
        raw = await driver.exec(container.id, ["sh", "-c", "exec >&- 2>&-; sleep 1; exit 3"])
        assert (raw.exit_code, raw.stream_broken) == (3, False)
    finally:
        await proxy.close()
        container.remove(force=True)
