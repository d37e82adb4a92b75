"""Limits: capacity (503 + Retry-After), command timeout, memory kill, sandbox timeout expiry,
workspace size, output cap, container limits."""
from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

from tests.support.api import start_api, stop_api
from tests.support.engine import assert_released, sandbox_network
from tests.support.images import PYTHON
from tests.support.specs import spec
from daemon.appkeys import EVENTS

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images):
    instance = await start_api(max_sandboxes=3)
    yield instance
    await stop_api(instance)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def small(api):
    """A sandbox with small limits, shared by the command tests."""
    body = await api.create_from_spec(spec("small", resources={"memory": "128m", "cpus": 0.5, "pids": 64, "disk": "1m"}))
    assert body["state"] == "ready", body
    yield body
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_container_limits_applied(small, docker_client):
    container = docker_client.containers.get(f"svc-{small['id']}-agent")
    host = container.attrs["HostConfig"]
    assert host["NanoCpus"] == 500_000_000 and host["Memory"] == 128 * 1024**2 and host["PidsLimit"] == 64
    assert small["resources"] == {"cpus": 0.5, "memory": 128 * 1024**2, "pids": 64, "disk": 1024**2, "timeout": 1800.0}
    network = sandbox_network(docker_client, small["id"])
    assert network.attrs["Internal"] is True
    labels = container.labels
    assert labels["svc.sandbox"] == small["id"] and labels["svc.tenant"] and labels["svc.daemon"].startswith("dmn_")


async def test_command_timeout_is_killed_and_reported(api, small):
    out = await api.run(small["id"], "echo started; sleep 30; echo never", timeout="1s")
    assert out["timed_out"] is True and out["exit_code"] == 124, out
    assert out["stdout"] == "started\n" and "timed out after 1s" in out["stderr"]
    stubborn = await api.run(small["id"], "trap '' TERM; sleep 30", timeout="1s")
    assert stubborn["timed_out"] is True and stubborn["exit_code"] == 137, stubborn  # killed after ignoring TERM
    leftovers = await api.run(small["id"], "ps -eo args | grep -c '[s]leep 30' || true")
    assert leftovers["stdout"].strip() == "0", leftovers
    quick = await api.run(small["id"], "exit 124", timeout="10s")
    assert quick["timed_out"] is False and quick["exit_code"] == 124


async def test_memory_limit_kill_is_reported(api, small):
    out = await api.run(small["id"], "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'", timeout="30s")
    assert out["oom_killed"] is True and out["exit_code"] == 137, out
    assert "out of memory" in out["stderr"] and "128MiB" in out["stderr"]
    assert out["timed_out"] is False
    after = await api.run(small["id"], "echo still alive")
    assert after["stdout"] == "still alive\n" and after["oom_killed"] is False
    killed = await api.run(small["id"], "kill -9 $$")
    assert killed["exit_code"] == 137 and killed["oom_killed"] is False, killed


async def test_output_is_capped(api, small):
    out = await api.run(small["id"], "head -c 3000000 /dev/zero | tr '\\0' a")
    assert out["exit_code"] == 0
    assert out["stdout"].startswith("a" * 1000) and len(out["stdout"]) < 1024 * 1024 + 200
    assert "[svc] output truncated" in out["stdout"]


async def test_workspace_size_warning(api, small):
    # The 1 MiB limit is enforced: the write fails inside the container and is reported.
    out = await api.run(small["id"], "head -c 2000000 /dev/zero > big.bin")
    assert out["exit_code"] != 0 and "No space left on device" in out["stderr"], out
    response, body = await api.get(f"/v1/sandboxes/{small['id']}")
    assert body["limits_exceeded"] == ["workspace"]
    audits = [e["data"] for e in api.app[EVENTS].history[f"sandbox:{small['id']}"] if e["event_type"] == "audit"]
    warning = next(a for a in audits if a["type"] == "warning")
    assert warning["details"]["kind"] == "workspace_size" and warning["details"]["limit_bytes"] == 1024**2
    assert warning["details"]["enforced"] is True
    await api.run(small["id"], "rm big.bin")


async def test_capacity_is_per_tenant_with_retry_after(api, small, docker_client):
    # `small` holds one slot of 3.
    ids = []
    for _ in range(2):
        response, body = await api.post("/v1/sandboxes", json={"image": PYTHON})
        assert response.status == 201, body
        ids.append(body["id"])
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON})
    assert response.status == 503, body
    assert body["error"] == "at_capacity" and body["details"]["limit"] == 3
    assert int(response.headers["Retry-After"]) == body["details"]["retry_after"] > 0
    response, tenant = await api.post("/v1/tenants", json={"name": "second"})
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON}, key=tenant["key"]["secret"])
    assert response.status == 201, body  # another tenant has its own limit
    await api.delete(f"/v1/sandboxes/{body['id']}", key=tenant["key"]["secret"])
    await api.delete(f"/v1/sandboxes/{ids[0]}")
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON})
    assert response.status == 201, body
    for sid in (ids[1], body["id"]):
        await api.delete(f"/v1/sandboxes/{sid}")
        assert_released(docker_client, sid)


async def test_timeout_expiry_stops_the_sandbox_and_streams_destroyed(api, docker_client):
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON, "timeout": "2s"})
    assert response.status == 201
    sid = body["id"]
    ready = await api.wait_state(sid)
    assert ready["state"] == "ready"
    events = await api.events(sid, timeout=15)
    assert events[-1] == {"event_type": "status", "data": {"state": "destroyed"}}
    response, body = await api.get(f"/v1/sandboxes/{sid}")
    assert body["state"] == "stopped" and body["stop_reason"] == "timeout"
    assert_released(docker_client, sid)


async def test_timeout_can_be_reset_and_409_when_stopped(api):
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON, "timeout": "1h"})
    sid = body["id"]
    await api.wait_state(sid)
    before = time.time()
    response, body = await api.post(f"/v1/sandboxes/{sid}/timeout", json={"timeout": "1s"})
    assert response.status == 200 and body["id"] == sid
    from datetime import datetime

    expires = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")).timestamp()
    assert before + 0.5 < expires < before + 2.5
    state = await api.wait_state(sid, ("stopped",), timeout=10)
    assert state["stop_reason"] == "timeout"
    response, body = await api.post(f"/v1/sandboxes/{sid}/timeout", json={"timeout": "10m"})
    assert response.status == 409 and body["error"] == "conflict" and body["details"] == {"state": "stopped"}
    response, body = await api.post(f"/v1/sandboxes/{sid}/timeout", json={"timeout": "nope"})
    assert response.status == 400


async def test_spec_timeout_and_request_override(api):
    body = await api.create_from_spec(spec("timed", resources={"timeout": "20m"}), timeout="5m")
    assert body["resources"]["timeout"] == 300.0
    await api.delete(f"/v1/sandboxes/{body['id']}")
    body = await api.create_from_spec(spec("timed"))
    assert body["resources"]["timeout"] == 1800.0
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_commands_wait_for_a_shape_a_boot(api):
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON})
    assert body["status"] == "provisioning"
    out = await api.run(body["id"], "echo hi")  # sent while provisioning
    assert out["stdout"] == "hi\n"
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_parallel_creates_respect_capacity(api, small):
    results = await asyncio.gather(*(api.post("/v1/sandboxes", json={"image": PYTHON}) for _ in range(6)))
    statuses = sorted(r.status for r, _ in results)
    live_before = 1  # `small`
    assert statuses.count(201) == 3 - live_before and statuses.count(503) == 6 - (3 - live_before), statuses
    for response, body in results:
        if response.status == 201:
            await api.delete(f"/v1/sandboxes/{body['id']}")
