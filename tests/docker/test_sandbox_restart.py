"""The real `svcd` with its own home and socket: sandboxes created over the Unix socket, the daemon
SIGKILLed (its containers orphaned), restarted: orphans reaped, the rows read `stopped`; a clean
shutdown (SIGTERM) stops every sandbox."""
from __future__ import annotations

import shutil
import signal

import pytest
import yaml

from tests.support.engine import labelled
from tests.support.homes import short_home
from tests.support.images import PYTHON
from tests.support.procs import SvcdProcess as Daemon
from tests.support.specs import spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def home(stock_images):
    path = short_home("svc-rs-")
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
        async def booted():
            _, body = await daemon.request("GET", f"/v1/sandboxes/{a['id']}")
            return body if body["state"] != "creating" else None
        a = await wait_for(booted, what="sandbox a to leave creating")
        assert a["state"] == "ready", a
        containers, _ = labelled(docker_client, sandbox=b["id"])
        assert len(containers) == 2  # agent, cache (no egress proxy: nothing may leave); its network is pooled
        daemon_id = containers[0].labels["svc.daemon"]

        daemon.kill(signal.SIGKILL)
        orphans, orphan_nets = labelled(docker_client, daemon=daemon_id)
        assert len(orphans) == 3 and len(orphan_nets) == 2  # SIGKILL leaves them behind

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
