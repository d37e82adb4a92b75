"""Finding 6 (specs): a 30 MiB YAML spec froze the event loop for 9 s (parsed on it) and /health
stopped answering. A spec is now capped (SERVICE_MAX_SPEC_BYTES, 413 naming the limit) and parsed
off the event loop; finding 13: spec names and versions have per-tenant quotas (409)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from daemon.api import specs as specs_api
from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.specs import SPEC_YAML


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    return await api_on(aiohttp_client, create_app(make_settings(
        tmp_path / "home", max_spec_bytes=64 * 1024, max_specs_per_tenant=3, max_spec_versions=3)))


def padded(size: int, spec_id: str = "big") -> str:
    """A valid spec of about `size` bytes (a long comment)."""
    text = SPEC_YAML.replace("id: hello", f"id: {spec_id}")
    return text + "# " + "x" * max(0, size - len(text)) + "\n"


async def test_a_yaml_spec_over_the_size_cap_is_413_naming_the_limit(api):
    response, body = await api.post("/v1/specs?name=big", data=padded(200 * 1024).encode(),
                                    headers={"Content-Type": "application/x-yaml"})
    assert (response.status, body["error"], body["details"]["limit_bytes"], "65536" in body["message"]) \
        == (413, "payload_too_large", 64 * 1024, True)


async def test_a_json_spec_over_the_size_cap_is_413(api):
    response, body = await api.post("/v1/specs", json={"name": "big", "yaml": padded(200 * 1024)})
    assert (response.status, body["details"]["limit_bytes"]) == (413, 64 * 1024)


async def test_health_answers_while_a_big_spec_is_being_parsed(api, monkeypatch):
    """The ordering is the assertion: a /health sent while the spec is parsed answers before the
    parse ends. The parse is held (in whatever thread runs it) until /health has answered or 5 s
    passed; parsed on the event loop, /health cannot answer until the parse is over."""
    order: list[str] = []
    started = threading.Event()
    health_done = threading.Event()
    real = specs_api.load_spec

    def held_parse(text, source):
        started.set()
        health_done.wait(5)
        try:
            return real(text, source)
        finally:
            order.append("parse done")

    monkeypatch.setattr(specs_api, "load_spec", held_parse)
    upload = asyncio.ensure_future(api.post("/v1/specs", json={"name": "big", "yaml": padded(60 * 1024)}))
    while not started.is_set():
        await asyncio.sleep(0.01)
    response, body = await api.client.get("/health"), None
    order.append(f"health {response.status}")
    health_done.set()
    response, body = await upload
    assert (order, response.status) == (["health 200", "parse done"], 201)


async def test_a_tenant_cannot_store_more_spec_names_than_its_quota(api):
    for n in range(3):
        await api.upload_yaml(padded(0, f"s{n}"), name=f"s{n}")
    response, body = await api.post("/v1/specs", json={"name": "s3", "yaml": padded(0, "s3")})
    assert (response.status, body["details"]["state"], body["details"]["limit"], "SERVICE_MAX_SPECS_PER_TENANT" in body["message"]) \
        == (409, "limit_reached", 3, True)


async def test_a_spec_cannot_have_more_versions_than_the_quota(api):
    for _ in range(3):
        await api.upload_yaml(padded(0, "s0"), name="s0")
    response, body = await api.post("/v1/specs", json={"name": "s0", "yaml": padded(0, "s0")})
    assert (response.status, body["details"]["state"], body["details"]["limit"], "SERVICE_MAX_SPEC_VERSIONS" in body["message"]) \
        == (409, "limit_reached", 3, True)


async def test_the_name_quota_is_per_tenant(api, other_tenant_key):
    for n in range(3):
        await api.upload_yaml(padded(0, f"s{n}"), name=f"s{n}")
    response, body = await api.post("/v1/specs", json={"name": "s3", "yaml": padded(0, "s3")}, key=other_tenant_key)
    assert response.status == 201, body
