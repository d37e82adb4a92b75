"""A real `svcd` on the swarm, SIGKILLed with a sandbox running: its services stay behind on the
nodes; the restarted daemon removes them by label and reads the sandbox `stopped`."""
from __future__ import annotations

import shutil
import signal

import pytest

from tests.support.homes import short_home
from tests.support.procs import SvcdProcess
from tests.support.swarm import PYTHON, daemon_env, labelled_containers
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def home():
    path = short_home("svc-swr-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_sigkilled_daemon_on_the_swarm_reaps_its_sandbox_after_restart(swarm, home):
    daemon = SvcdProcess(home, daemon_env(swarm))
    await daemon.start()
    try:
        status, sandbox = await daemon.request("POST", "/v1/sandboxes", {"image": PYTHON})
        assert status == 201, sandbox

        async def ready():
            _, body = await daemon.request("GET", f"/v1/sandboxes/{sandbox['id']}")
            return body if body["state"] != "creating" else None

        booted = await wait_for(ready, timeout=90, what="the sandbox to leave creating", interval=0.5)
        assert booted["state"] == "ready", booted
        placed = labelled_containers(swarm, {"svc.sandbox": sandbox["id"]})
        assert placed, "the sandbox's agent runs on a node"

        daemon.kill(signal.SIGKILL)
        assert labelled_containers(swarm, {"svc.sandbox": sandbox["id"]}), "SIGKILL leaves the agent behind"

        await daemon.start()

        async def reaped():
            return labelled_containers(swarm, {"svc.sandbox": sandbox["id"]}) == {}

        assert await wait_for(reaped, timeout=60, what="the orphaned sandbox removed from every node", interval=1.0)
        status, body = await daemon.request("GET", f"/v1/sandboxes/{sandbox['id']}")
        assert (status, body["state"], body["stop_reason"]) == (200, "stopped", "daemon_restart"), body
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill(signal.SIGTERM)
