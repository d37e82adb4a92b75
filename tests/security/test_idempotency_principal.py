"""An agent sends its sandbox token's request with an Idempotency-Key the tenant will use later:
idempotency records belong to the principal that sent the request (an API key, a sandbox token), so
the tenant's request still runs (daemon/middleware.py idempotency)."""
from __future__ import annotations

from daemon import auth
from daemon.appkeys import DEFAULT_TENANT_ID, STORE
from tests.support.store import add_sandbox

KEY = {"Idempotency-Key": "nightly-key-1"}


async def test_a_sandbox_tokens_idempotency_key_does_not_block_the_tenants_request(api):
    await add_sandbox(api, "sbx_agent")
    token = await auth.create_sandbox_token(api.app[STORE], api.app[DEFAULT_TENANT_ID], "sbx_agent")
    response, body = await api.post("/v1/sandboxes/sbx_agent/trace", key=token, headers=KEY,
                                    json={"events": [{"event_type": "tool_call", "tool": "ls"}]})
    assert response.status == 202, body
    response, body = await api.post("/v1/keys", headers=KEY, json={"name": "ci"})
    assert response.status == 201, body
