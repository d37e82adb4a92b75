"""Sandbox tests against the real Docker engine: an in-process daemon app (real store, real HTTP
stack, real containers) per module, so read-only assertions can share one booted sandbox.

Modules using these fixtures set `pytestmark = pytest.mark.asyncio(loop_scope="module")`.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from aiohttp.test_utils import TestClient, TestServer

from client.config import read_env_file
from daemon.app import create_app
from daemon.config import Settings

PYTHON = "localhost/svc/python:3.11"


class Api:
    """An HTTP client on an in-process daemon that sends the default tenant's key."""

    def __init__(self, client: TestClient, key: str, home: Path):
        self.client = client
        self.key = key
        self.home = home
        self.app = client.server.app

    @property
    def manager(self):
        return self.app["sandboxes"]

    async def call(self, method: str, path: str, *, key: str | None = None, headers: dict | None = None, **kw):
        hdrs = {"Authorization": f"Bearer {key or self.key}", **(headers or {})}
        response = await self.client.request(method, path, headers=hdrs, **kw)
        raw = await response.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        return response, body

    async def get(self, path, **kw):
        return await self.call("GET", path, **kw)

    async def post(self, path, **kw):
        return await self.call("POST", path, **kw)

    async def delete(self, path, **kw):
        return await self.call("DELETE", path, **kw)

    # --- sandbox helpers -------------------------------------------------------------------------

    async def upload_spec(self, doc: dict[str, Any], files: dict[str, bytes] | None = None) -> str:
        """Upload `doc`; `files` are the fixture files it names ({relative path: bytes}), sent the
        way the CLI sends them."""
        import base64

        text = yaml.safe_dump(doc, sort_keys=False)
        payload: dict[str, Any] = {"name": doc["id"], "yaml": text}
        if files:
            payload["files"] = {path: base64.b64encode(data).decode() for path, data in files.items()}
        response, body = await self.post("/v1/specs", json=payload)
        assert response.status in (200, 201), body
        return body["id"]

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
        """Every lifecycle event until the stream closes."""
        response = await self.client.get(f"/v1/sandboxes/{sandbox_id}/events",
                                         headers={"Authorization": f"Bearer {self.key}", "Accept": "text/event-stream"})
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = []

        async def read() -> None:
            async for line in response.content:
                text = line.decode().rstrip("\r\n")
                if text.startswith("data:"):
                    events.append(json.loads(text[5:]))

        await asyncio.wait_for(read(), timeout)
        return events


def short_home() -> Path:
    # Unix socket paths are limited to ~107 bytes: keep homes short.
    return Path(tempfile.mkdtemp(prefix="svc-dk-", dir="/tmp"))


async def start_api(**overrides) -> Api:
    home = short_home()
    settings = Settings(home=home, socket_path=home / "svcd.sock", port=0, **overrides)
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    return Api(client, key, home)


async def stop_api(api: Api) -> None:
    await api.client.close()
    shutil.rmtree(api.home, ignore_errors=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images) -> Api:
    """A daemon app for the whole module; its shutdown destroys whatever sandboxes are left."""
    instance = await start_api()
    yield instance
    await stop_api(instance)


def labelled(docker_client, **labels: str) -> tuple[list, list]:
    """Containers (all states) and networks carrying every given svc.* label."""
    filters = {"label": [f"svc.{k}={v}" for k, v in labels.items()]}
    return docker_client.containers.list(all=True, filters=filters), docker_client.networks.list(filters=filters)


def assert_released(docker_client, sandbox_id: str) -> None:
    containers, networks = labelled(docker_client, sandbox=sandbox_id)
    assert containers == [] and networks == [], (
        f"sandbox {sandbox_id} left {[c.name for c in containers]} and {[n.name for n in networks]}"
    )


def spec(spec_id: str, **blocks: Any) -> dict[str, Any]:
    """A minimal valid spec document with extra top-level blocks."""
    doc: dict[str, Any] = {
        "version": 1,
        "id": spec_id,
        "base": PYTHON,
        "task": {"prompt": "test"},
        "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}},
    }
    doc.update(blocks)
    return doc
