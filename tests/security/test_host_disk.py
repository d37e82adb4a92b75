"""What a sandbox writes on the host is bounded: the egress proxy's audit (past its cap every request
is refused, so nothing leaves unaudited), the engine's log of a container, /agent (read-only), the
unpacked size of a bundle."""
from __future__ import annotations

import json
import os

import pytest
import pytest_asyncio

from daemon.sandbox import boot
from tests.support.images import PYTHON
from tests.support.runs import cli_spec, inv, run_spec, upload_agent
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

CAP = 16 * 1024


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def flooded(engine_api):
    """A sandbox whose agent sent 300 refused requests through a proxy with a 16 KiB audit cap."""
    os.environ["SERVICE_EGRESS_AUDIT_CAP"] = str(CAP)
    try:
        body = await engine_api.create_from_spec(spec("egress-flood", network={"egress": {"default": "deny",
                                                                                       "allow": ["x.test"]}},
                                                      audit={"http_calls": True}))
    finally:
        del os.environ["SERVICE_EGRESS_AUDIT_CAP"]
    assert body["state"] == "ready", body
    out = await engine_api.run(body["id"], "for i in $(seq 300); do curl -s -m 2 -o /dev/null http://denied$i.test/; done; "
                                           "curl -s -m 2 http://x.test/")
    yield body["id"], out
    await engine_api.delete(f"/v1/sandboxes/{body['id']}")


async def test_the_egress_audit_stops_at_its_cap(engine_api, flooded):
    sid, _ = flooded
    path = engine_api.manager.runtime(sid).runtime_dir / "audit-in" / "egress.jsonl"
    assert path.stat().st_size <= CAP


async def test_a_full_egress_audit_refuses_every_request(engine_api, flooded):
    _, out = flooded
    assert "the egress audit is full" in out["stdout"], out


async def test_a_container_log_is_capped_by_the_engine(engine_api, docker_client):
    body = await engine_api.create_from_spec(spec("log-cap"))
    try:
        agent = docker_client.containers.list(filters={"label": [f"svc.sandbox={body['id']}", "svc.role=agent"]})[0]
        assert agent.attrs["HostConfig"]["LogConfig"]["Config"].get("max-size"), agent.attrs["HostConfig"]["LogConfig"]
    finally:
        await engine_api.delete(f"/v1/sandboxes/{body['id']}")


def snapshot_spec(spec_id: str, name: str) -> dict:
    return {"version": 1, "id": spec_id, "base": PYTHON, "task": {"prompt": "go"},
            "agent": {"type": "snapshot", "snapshot": name, "timeout": "30s"},
            "invariants": {"ran": inv({"type": "file_exists", "path": "ran.txt"})}, "resources": {"timeout": "2m"}}


async def test_the_agent_cannot_write_into_its_bundle_directory(engine_api, tmp_path):
    """/agent is a host directory outside the workspace's disk quota: the agent only reads it."""
    (tmp_path / "agent.sh").write_text("touch /workspace/ran.txt\nif echo x > /agent/grown; then echo WROTE; else echo REFUSED; fi\n")
    await upload_agent(engine_api, "bundle-writer", tmp_path, ["sh", "agent.sh"])
    run = await run_spec(engine_api, snapshot_spec("bundle-writer", "bundle-writer"))
    response = await engine_api.client.get(run["trajectory_url"], headers={"Authorization": f"Bearer {engine_api.key}"})
    trajectory = await response.json()
    assert trajectory["agent"]["stdout"].strip() == "REFUSED", trajectory["agent"]


async def test_a_bundle_over_the_unpacked_cap_fails_the_boot(engine_api, tmp_path, monkeypatch):
    monkeypatch.setattr(boot, "BUNDLE_UNPACKED_CAP", 1024 * 1024)
    (tmp_path / "agent.sh").write_text("touch /workspace/ran.txt\n")
    (tmp_path / "zeros.bin").write_bytes(bytes(2 * 1024 * 1024))  # compresses to almost nothing
    await upload_agent(engine_api, "bundle-bomb", tmp_path, ["sh", "agent.sh"])
    run = await run_spec(engine_api, snapshot_spec("bundle-bomb", "bundle-bomb"))
    assert run["status"] == "errored" and "unpacks to more than" in json.dumps(run), run


async def test_writing_past_the_disk_limit_outside_the_workspace_stops_the_agent(engine_api):
    """The container's writable layer is on the host's disk too: it counts against resources.disk."""
    doc = cli_spec("layer-flood", "dd if=/dev/zero of=/tmp/big bs=1M count=120 2>/dev/null; sleep 20; touch done.txt",
                   {"done": inv({"type": "file_exists", "path": "done.txt"})})
    doc["resources"] = {"timeout": "2m", "disk": "64m"}
    run = await run_spec(engine_api, doc)
    assert run["status"] == "errored" and run["error"]["code"] == "container_disk_limit", run
