"""The real `svcd` with its own home and socket: sandboxes created over the Unix socket, the daemon
SIGKILLed (its containers orphaned), restarted: orphans reaped, the rows read `stopped`; a clean
shutdown (SIGTERM) stops every sandbox."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest
import yaml

from client.config import read_env_file
from tests.docker.conftest import PYTHON, labelled, spec

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.asyncio(loop_scope="module")


class Daemon:
    def __init__(self, home: Path):
        self.home = home
        self.socket = home / "svcd.sock"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
        env.update(SERVICE_HOME=str(self.home), SERVICE_SOCKET=str(self.socket), SERVICE_PORT="0")
        return env

    async def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=self.env(), cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            try:
                status, _ = await self.request("GET", "/health", auth=False)
                if status == 200:
                    return
            except (aiohttp.ClientError, FileNotFoundError, ConnectionRefusedError, OSError):
                pass
            assert time.monotonic() < deadline, "svcd did not answer within 60s"
            await asyncio.sleep(0.05)

    async def request(self, method: str, path: str, body=None, auth: bool = True):
        headers = {}
        if auth:
            headers["Authorization"] = "Bearer " + read_env_file(self.home / "credentials")["SERVICE_API_KEY"]
        connector = aiohttp.UnixConnector(path=str(self.socket))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.request(method, "http://svcd" + path, json=body, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=120)) as response:
                raw = await response.read()
                return response.status, (json.loads(raw) if raw else None)

    def kill(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)


@pytest.fixture
def home(stock_images):
    path = Path(tempfile.mkdtemp(prefix="svc-rs-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_sigkill_then_restart_reaps_orphans_and_marks_rows_stopped(home, docker_client):
    daemon = Daemon(home)
    await daemon.start()
    try:
        doc = spec("restart", services=[{"name": "cache", "type": "redis"}])
        status, record = await daemon.request("POST", "/v1/specs", {"name": "restart", "yaml": yaml.safe_dump(doc)})
        assert status == 201, record
        status, b = await daemon.request("POST", "/v1/sandboxes", {"spec_id": "restart"})
        assert status == 201 and b["state"] == "ready", b
        status, a = await daemon.request("POST", "/v1/sandboxes", {"image": PYTHON})
        assert status == 201, a
        for _ in range(200):
            status, a = await daemon.request("GET", f"/v1/sandboxes/{a['id']}")
            if a["state"] != "creating":
                break
            await asyncio.sleep(0.05)
        assert a["state"] == "ready", a
        containers, networks = labelled(docker_client, sandbox=b["id"])
        assert len(containers) == 3 and len(networks) == 1  # agent, cache, egress proxy
        daemon_id = containers[0].labels["svc.daemon"]

        daemon.kill(signal.SIGKILL)
        orphans, orphan_nets = labelled(docker_client, daemon=daemon_id)
        assert len(orphans) == 5 and len(orphan_nets) == 2  # SIGKILL leaves them behind (each sandbox has a proxy)

        await daemon.start()
        containers, networks = labelled(docker_client, daemon=daemon_id)
        assert containers == [] and networks == [], ([c.name for c in containers], [n.name for n in networks])
        for sandbox in (a, b):
            status, body = await daemon.request("GET", f"/v1/sandboxes/{sandbox['id']}")
            assert status == 200 and body["state"] == "stopped" and body["status"] == "stopped", body
            assert body["stop_reason"] == "daemon_restart" and body["stopped_at"]
            assert not (home / "workspaces" / sandbox["id"]).exists()
        status, page = await daemon.request("GET", "/v1/sandboxes")
        assert page["items"] == []
        status, page = await daemon.request("GET", "/v1/sandboxes?status=stopped")
        assert {s["id"] for s in page["items"]} == {a["id"], b["id"]}

        # The restarted daemon still works, and SIGTERM stops what it runs.
        status, c = await daemon.request("POST", "/v1/sandboxes", {"spec_id": "restart"})
        assert status == 201 and c["state"] == "ready", c
        daemon.kill(signal.SIGTERM)
        assert daemon.proc.returncode == 0
        containers, networks = labelled(docker_client, daemon=daemon_id)
        assert containers == [] and networks == []
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill(signal.SIGTERM)
