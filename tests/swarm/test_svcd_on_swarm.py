"""What a user does: `set -a; . .svc-home/swarm.env` and start `svcd`. A real daemon process with
exactly those settings runs a command in a sandbox on the swarm, and the file it wrote is in the
workspace the daemon reads (the sandbox socket every agent gets is left out on a node)."""
from __future__ import annotations

import shutil
import signal

import pytest

from daemon.sandbox.engine.swarm.settings import read_env_file
from tests.support.homes import short_home
from tests.support.procs import SvcdProcess
from tests.support.swarm import ENV_FILE, PYTHON
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def home():
    path = short_home("svc-sws-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_svcd_started_with_swarm_env_runs_a_command_on_the_swarm(swarm, home):
    daemon = SvcdProcess(home, read_env_file(ENV_FILE.read_text()))
    await daemon.start()
    try:
        status, sandbox = await daemon.request("POST", "/v1/sandboxes", {"image": PYTHON})
        assert status == 201, sandbox

        async def ready():
            _, body = await daemon.request("GET", f"/v1/sandboxes/{sandbox['id']}")
            return body if body["state"] != "creating" else None

        await wait_for(ready, timeout=90, what="the sandbox to leave creating", interval=0.5)
        status, ran = await daemon.request("POST", f"/v1/sandboxes/{sandbox['id']}/commands", {"command": "echo ran > out.txt"})
        _, state = await daemon.request("GET", f"/v1/sandboxes/{sandbox['id']}/state")
        assert (status, ran.get("exit_code"), [f["path"] for f in state["files"]]) == (200, 0, ["out.txt"]), ran
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill(signal.SIGTERM)
