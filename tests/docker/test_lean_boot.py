"""The lean boot: the egress proxy is a helper that starts beside the agent and the services, and
only when something must go through it. A boot that fails beside a starting proxy leaves nothing
behind; a proxy that is needed is listening once the sandbox is ready."""
from __future__ import annotations

import pytest

from tests.support.engine import assert_released
from tests.support.images import PYTHON
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

AUDITED = {"audit": {"http_calls": True}}


async def test_a_failed_service_leaves_no_proxy_behind(api, docker_client):
    body = await api.create_from_spec(spec("lean-crash", services=[
        {"name": "crashy", "image": PYTHON, "command": ["sh", "-c", "exit 3"], "wait_for": {"port": 80, "timeout": "20s"}}],
        **AUDITED))
    assert body["state"] == "error" and body["error"]["step"] == "services", body
    assert_released(docker_client, body["id"])


async def test_http_audit_brings_the_proxy_and_it_answers_at_ready(api, docker_client):
    body = await api.create_from_spec(spec("lean-audited", **AUDITED))
    assert body["state"] == "ready", body
    sid = body["id"]
    try:
        out = await api.run(sid, "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://outside.test/")
        assert out["stdout"] == "403", out  # the proxy answered (default deny), not a missing proxy
    finally:
        await api.delete(f"/v1/sandboxes/{sid}")
    assert_released(docker_client, sid)
