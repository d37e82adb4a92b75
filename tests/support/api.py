"""ONE HTTP client for the daemon in tests, and ways to start an in-process daemon app.

`Api` wraps an aiohttp `TestClient` (in-process app on a real socket): every call sends the
default tenant's key unless told otherwise and returns `(response, body)`, body being the parsed
JSON, else the raw bytes (a file is the bytes it holds), None when empty.
"""
from __future__ import annotations

import asyncio
import base64
import json
import shutil
import time
from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient, TestServer

from client.config import read_env_file
from daemon.app import create_app
from daemon.config import Settings
from tests.support.homes import short_home
from tests.support.sse import read_sse_data
from daemon.appkeys import SANDBOXES, SETTINGS


def make_settings(home: Path, **overrides: Any) -> Settings:
    """Settings for a daemon whose home (and socket) is `home`; port 0. No warm sandbox pool unless
    `pool_size` is given (the suite's container counts and CI time assume none; tests/docker/test_pool.py).
    Outbound URLs may name loopback and private addresses unless `outbound_allow_private=False`."""
    overrides.setdefault("pool_size", 0)
    # The suite's webhook and alert receivers listen on 127.0.0.1: the operator allowance for loopback and
    # private destinations (tests/security/ starts apps without it).
    overrides.setdefault("outbound_allow_private", True)
    return Settings(home=home, socket_path=home / "svcd.sock", port=0, **overrides)


def default_key(home_or_settings: Path | Settings) -> str:
    path = home_or_settings.credentials_path if isinstance(home_or_settings, Settings) else home_or_settings / "credentials"
    return read_env_file(path)["SERVICE_API_KEY"]


def decode_body(raw: bytes, content_type: str = "") -> Any:
    """JSON when the body parses as JSON, else the bytes."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        pass
    return raw


class Api:
    """An HTTP client on an in-process daemon that sends the default tenant's key."""

    def __init__(self, client: TestClient, key: str, home: Path | None = None):
        self.client = client
        self.key = key
        self.home = home
        self.app = client.server.app

    @property
    def manager(self):
        return self.app[SANDBOXES]

    def headers(self, key: str | None = None, extra: dict | None = None) -> dict:
        headers = {"Authorization": f"Bearer {key or self.key}"}
        headers.update(extra or {})
        return headers

    def base_url(self) -> str:
        return str(self.client.make_url("")).rstrip("/")

    async def call(self, method: str, path: str, *, key: str | None = None, headers: dict | None = None, **kw):
        response = await self.client.request(method, path, headers=self.headers(key, headers), **kw)
        raw = await response.read()
        return response, decode_body(raw, response.headers.get("Content-Type", ""))

    async def get(self, path, **kw):
        return await self.call("GET", path, **kw)

    async def post(self, path, **kw):
        return await self.call("POST", path, **kw)

    async def put(self, path, **kw):
        return await self.call("PUT", path, **kw)

    async def patch(self, path, **kw):
        return await self.call("PATCH", path, **kw)

    async def delete(self, path, **kw):
        return await self.call("DELETE", path, **kw)

    # --- streams ---------------------------------------------------------------------------------

    async def sse(self, path: str, timeout: float = 30, key: str | None = None, **kw) -> list[Any]:
        """The data of every event of the SSE stream at `path` until it closes."""
        response = await self.client.get(path, headers=self.headers(key, {"Accept": "text/event-stream"}), **kw)
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return await read_sse_data(response, timeout)

    # --- specs -----------------------------------------------------------------------------------

    async def upload_yaml(self, text: str, name: str = "x", files: dict[str, bytes] | None = None, expect: int = 201,
                          key: str | None = None) -> dict:
        """Upload a spec given as YAML text (as tenant `key`); every upload is 201 Created (a new version)."""
        payload: dict[str, Any] = {"name": name, "yaml": text}
        if files:
            payload["files"] = {path: base64.b64encode(data).decode() for path, data in files.items()}
        response, body = await self.post("/v1/specs", json=payload, key=key)
        assert response.status == expect, body
        return body

    async def upload_doc(self, doc: dict[str, Any], files: dict[str, bytes] | None = None, expect: int = 201) -> dict:
        """Upload a spec document; `files` are the fixture files it names ({relative path: bytes}),
        sent the way the CLI sends them."""
        return await self.upload_yaml(yaml.safe_dump(doc, sort_keys=False), name=doc["id"], files=files, expect=expect)

    async def upload_spec(self, doc: dict[str, Any], files: dict[str, bytes] | None = None) -> str:
        return (await self.upload_doc(doc, files))["id"]

    # --- sandboxes -------------------------------------------------------------------------------

    async def create_from_spec(self, doc: dict[str, Any], expect: int = 201, files: dict[str, bytes] | None = None,
                               **extra) -> dict:
        spec_id = await self.upload_spec(doc, files)
        response, body = await self.post("/v1/sandboxes", json={"spec_id": spec_id, **extra})
        assert response.status == expect, body
        return body

    async def run(self, sandbox_id: str, command: str | list[str], expect: int = 200, **extra) -> dict:
        response, body = await self.post(f"/v1/sandboxes/{sandbox_id}/commands", json={"command": command, **extra})
        assert response.status == expect, body
        return body

    async def wait_state(self, sandbox_id: str, states: tuple[str, ...] = ("ready", "running", "error", "stopped"),
                         timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            response, body = await self.get(f"/v1/sandboxes/{sandbox_id}")
            assert response.status == 200, body
            if body["state"] in states:
                return body
            assert time.monotonic() < deadline, f"sandbox {sandbox_id} still {body['state']} after {timeout}s"
            await asyncio.sleep(0.05)

    async def events(self, sandbox_id: str, timeout: float = 30) -> list[dict]:
        """Every lifecycle event of a sandbox until the stream closes."""
        return await self.sse(f"/v1/sandboxes/{sandbox_id}/events", timeout=timeout)


async def api_on(aiohttp_client, app) -> Api:
    """An `Api` on `app` through pytest-aiohttp's `aiohttp_client` fixture (closed by it)."""
    client = await aiohttp_client(app)
    settings: Settings = app[SETTINGS]
    return Api(client, default_key(settings), settings.home)


async def start_api(home: Path | None = None, **overrides) -> Api:
    """A daemon app on a real local socket, in this event loop; stop it with `stop_api`."""
    home = home or short_home("svc-dk-")
    settings = make_settings(home, **overrides)
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    return Api(client, default_key(settings), home)


async def stop_api(api: Api, remove_home: bool = True) -> None:
    await api.client.close()
    if remove_home and api.home is not None:
        shutil.rmtree(api.home, ignore_errors=True)
