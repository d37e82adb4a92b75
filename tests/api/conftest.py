"""API tests: the real aiohttp app and store, in-process, through the real HTTP stack."""
from __future__ import annotations

from pathlib import Path

import pytest

from client.config import read_env_file
from daemon.app import create_app
from daemon.config import Settings


def make_settings(home: Path, **overrides) -> Settings:
    return Settings(home=home, socket_path=home / "svcd.sock", port=0, **overrides)


class Api:
    """A test client that sends the default tenant's key unless told otherwise."""

    def __init__(self, client, key: str):
        self.client = client
        self.key = key
        self.app = client.server.app

    def headers(self, key: str | None = None, extra: dict | None = None) -> dict:
        headers = {"Authorization": f"Bearer {key or self.key}"}
        headers.update(extra or {})
        return headers

    async def call(self, method: str, path: str, *, key: str | None = None, headers: dict | None = None, **kw):
        response = await self.client.request(method, path, headers=self.headers(key, headers), **kw)
        try:
            body = await response.json(content_type=None)
        except ValueError:
            body = await response.text()
        return response, body

    async def get(self, path, **kw):
        return await self.call("GET", path, **kw)

    async def post(self, path, **kw):
        return await self.call("POST", path, **kw)

    async def put(self, path, **kw):
        return await self.call("PUT", path, **kw)

    async def delete(self, path, **kw):
        return await self.call("DELETE", path, **kw)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return make_settings(tmp_path / "home")


@pytest.fixture
async def api(aiohttp_client, settings) -> Api:
    client = await aiohttp_client(create_app(settings))
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    return Api(client, key)


@pytest.fixture
async def other_tenant_key(api) -> str:
    response, body = await api.post("/v1/tenants", json={"name": "acme"})
    assert response.status == 201, body
    return body["key"]["secret"]


SPEC_YAML = """\
version: 1
id: hello
base: localhost/svc/python:3.11
task:
  prompt: write hello.txt
agent:
  type: cli
  binary: sh
invariants:
  wrote:
    check:
      type: file_exists
      path: hello.txt
"""
