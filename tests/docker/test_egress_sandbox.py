"""Egress policy of real sandboxes booted through the daemon. A target HTTP server runs in a
container on another Docker network of this machine; nothing is ever sent beyond this machine.

* default (deny): the sandbox gets no egress proxy at all (nothing to let through or to watch):
  no proxy container, no proxy variables, and neither curl nor a raw socket reaches the target.
* `allow: [target.test]` with the daemon's private-address switch on (SERVICE_EGRESS_ALLOW_PRIVATE,
  which only tests use): the target becomes reachable through the proxy, and only it."""
from __future__ import annotations

import os
import uuid

import pytest

from tests.support.audit import wait_audit
from tests.support.engine import assert_released
from tests.support.images import PYTHON
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

PY = PYTHON


@pytest.fixture(scope="module")
def target(docker_client, stock_images):
    run = uuid.uuid4().hex[:8]
    labels = {"svc.test": "1", "svc.test.run": run}
    net = docker_client.networks.create(f"svc-egress-target-{run}", driver="bridge", internal=True, labels=labels)
    c = docker_client.containers.run(PY, ["python3", "-m", "http.server", "8080", "--directory", "/etc"], detach=True,
                                     labels=labels, network=net.name)
    net.reload()
    c.reload()
    ip = c.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"]
    try:
        yield c, ip
    finally:
        c.remove(force=True)
        net.remove()


async def audit(api, sid: str, type_: str, pred, timeout: float = 10) -> list[dict]:
    return [e["details"] for e in await wait_audit(api, sid, type_, pred, timeout=timeout)]


RAW = ("python3 -c \"import socket\ntry:\n    socket.create_connection(('{ip}', 8080), timeout=2); print('CONNECTED')\n"
       "except OSError as e:\n    print('FAILED', e)\"")


async def test_default_policy_denies_and_names_the_target(api, target, docker_client):
    container, ip = target
    body = await api.create_from_spec(spec("egress-deny"))
    assert body["state"] == "ready", body
    sid = body["id"]
    try:
        out = await api.run(sid, "env | grep -ic '^https\\?_proxy='; curl -sS -m 5 http://target.test:8080/hostname")
        assert out["stdout"].strip() == "0" and out["exit_code"] != 0, out
        out = await api.run(sid, RAW.format(ip=ip))
        assert "FAILED" in out["stdout"], out
        out = await api.run(sid, f"curl -sS -m 3 http://{ip}:8080/hostname")
        assert out["exit_code"] != 0, out
        roles = {c.labels.get("svc.role") for c in docker_client.containers.list(filters={"label": f"svc.sandbox={sid}"})}
        assert roles == {"agent"}, roles
    finally:
        await api.delete(f"/v1/sandboxes/{sid}")
    assert_released(docker_client, sid)


async def test_allow_rule_reaches_only_the_named_target(api, target, docker_client):
    container, ip = target
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    try:
        body = await api.create_from_spec(spec("egress-allow", network={"egress": {"default": "deny",
                                                                                    "allow": ["target.test"]}}))
    finally:
        del os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"]
    assert body["state"] == "ready", body
    sid = body["id"]
    try:
        # the target joins the sandbox's outside network under two names
        docker_client.api.connect_container_to_network(container.id, f"svc-{sid}-egress",
                                                       aliases=["target.test", "other.test"])
        out = await api.run(sid, "curl -sS -m 5 http://target.test:8080/hostname")
        assert out["exit_code"] == 0 and out["stdout"].strip() == container.attrs["Config"]["Hostname"], out
        out = await api.run(sid, "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://other.test:8080/hostname")
        assert out["stdout"] == "403", out
        # the agent itself still has no route there
        container.reload()
        outside_ip = container.attrs["NetworkSettings"]["Networks"][f"svc-{sid}-egress"]["IPAddress"]
        out = await api.run(sid, RAW.format(ip=outside_ip))
        assert "FAILED" in out["stdout"], out
        assert await audit(api, sid, "warning", lambda d: d.get("host") == "other.test")
    finally:
        try:
            docker_client.api.disconnect_container_from_network(container.id, f"svc-{sid}-egress", force=True)
        except Exception:
            pass
        await api.delete(f"/v1/sandboxes/{sid}")
    assert_released(docker_client, sid)
