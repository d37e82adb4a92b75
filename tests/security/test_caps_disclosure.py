"""Finding 13 (part): the public /health named the warm pool's shape hashes (which specs run on this
daemon), and another tenant's trace id answered 403 where an unknown one answers 404 (a way to
probe which trace ids exist)."""
from __future__ import annotations

from collections import deque

import pytest

from daemon.appkeys import SANDBOXES

SHAPE = "a1b2c3d4e5f60718" + "0" * 48


@pytest.fixture
def warm_pool(api):
    """A warm pool holding a sandbox of one shape (what a spec that ran here leaves behind); taken
    out again before the app drains its pool."""
    pool = api.app[SANDBOXES].pool
    pool.ready[SHAPE] = deque(["sb_pooled"])
    yield
    pool.ready.pop(SHAPE, None)


async def test_the_public_health_names_no_shape_hash(api, warm_pool):
    response = await api.client.get("/health")  # no key
    body = await response.json()
    assert (response.status, SHAPE[:16] in await response.text(), body["sandbox_pool"]["pooled"]) == (200, False, {})


async def test_health_with_a_key_still_shows_the_pool_shapes(api, warm_pool):
    response, body = await api.get("/v1/health")
    assert body["sandbox_pool"]["pooled"] == {SHAPE[:16]: 1}


async def test_another_tenants_trace_id_is_404_like_an_unknown_one(api, other_tenant_key):
    response, body = await api.post("/v1/traces", json={"events": [{"event_type": "span", "tool": "mine"}]})
    trace_id = body["trace_ids"][0]
    response, theirs = await api.get(f"/v1/traces/{trace_id}", key=other_tenant_key)
    response_unknown, unknown = await api.get("/v1/traces/trace-never-seen", key=other_tenant_key)
    assert (response.status, theirs["error"], theirs["details"]["resource"], response_unknown.status) == (404, "not_found", "trace", 404)
