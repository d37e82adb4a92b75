"""Webhooks: registration, signed delivery to a real local receiver, retries on 500, delivery log."""
from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from daemon.webhooks import emit, sign, verify
from daemon.appkeys import DEFAULT_TENANT_ID, STORE


class Receiver:
    """A real aiohttp server answering with the queued statuses (then 200)."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.calls: list[dict] = []
        self.event = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.calls.append({"headers": dict(request.headers), "body": body})
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.event.set()
        return web.Response(status=status, text="ok" if status == 200 else "nope")


@pytest.fixture
async def receiver(aiohttp_server):
    async def start(statuses=()):
        rec = Receiver(statuses)
        app = web.Application()
        app.router.add_post("/hook", rec.handle)
        server = await aiohttp_server(app)
        rec.url = str(server.make_url("/hook"))
        return rec

    return start


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setenv("SERVICE_WEBHOOK_BACKOFF_S", "0.01")


async def last_delivery(api, hook_id: str) -> dict:
    row = await api.app[STORE].fetchone("SELECT * FROM webhook_deliveries WHERE webhook_id = ? ORDER BY seq DESC LIMIT 1", (hook_id,))
    return dict(row) if row else {}


async def wait_status(api, hook_id: str, status: str, timeout: float = 5.0) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while (entry := await last_delivery(api, hook_id)).get("status") != status:
        assert asyncio.get_running_loop().time() < deadline, f"delivery never became {status}: {entry}"
        await asyncio.sleep(0.02)
    return entry


def hook_tenant(api) -> str:
    return api.app[DEFAULT_TENANT_ID]


async def test_register_list_get_delete(api, other_tenant_key):
    response, hook = await api.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/x", "events": ["run.completed"]})
    assert response.status == 201, hook
    assert hook["id"].startswith("wh_") and hook["secret"].startswith("whsec_") and hook["events"] == ["run.completed"]
    response, listing = await api.get("/v1/webhooks")
    assert [h["id"] for h in listing["items"]] == [hook["id"]]
    assert "secret" not in listing["items"][0] or listing["items"][0]["secret"] is None
    response, body = await api.get(f"/v1/webhooks/{hook['id']}", key=other_tenant_key)
    assert response.status == 403
    response, _ = await api.delete(f"/v1/webhooks/{hook['id']}")
    assert response.status == 204
    response, body = await api.get(f"/v1/webhooks/{hook['id']}")
    assert response.status == 404


async def test_validation(api):
    response, body = await api.post("/v1/webhooks", json={"url": "ftp://x"})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "url"
    response, body = await api.post("/v1/webhooks", json={"url": "http://x", "events": ["run.started"]})
    assert response.status == 400
    response, body = await api.post("/v1/webhooks", json={"url": "http://x"})
    assert response.status == 201 and body["events"] == ["run.completed", "replica.completed"]


async def test_signed_delivery(api, receiver):
    rec = await receiver()
    response, hook = await api.post("/v1/webhooks", json={"url": rec.url, "events": ["run.completed"], "secret": "topsecret-123"})
    run = {"id": "run_1", "status": "passed", "score": 1.0}
    ids = await emit(api.app, hook_tenant(api), "run.completed", run)
    assert len(ids) == 1
    assert await emit(api.app, hook_tenant(api), "replica.completed", {"id": "rep_1"}) == []  # not subscribed
    await asyncio.wait_for(rec.event.wait(), 5)
    call = rec.calls[0]
    assert json.loads(call["body"]) == run
    assert call["headers"]["X-Svc-Event"] == "run.completed"
    assert call["headers"]["X-Svc-Delivery"] == ids[0]
    assert verify("topsecret-123", call["headers"]["X-Svc-Signature"], call["body"])
    assert not verify("wrong-secret", call["headers"]["X-Svc-Signature"], call["body"])
    assert not verify("topsecret-123", call["headers"]["X-Svc-Signature"], call["body"] + b" ")
    await wait_status(api, hook["id"], "delivered")
    response, log = await api.get(f"/v1/webhooks/{hook['id']}/deliveries")
    entry = log["items"][0]
    assert entry["status"] == "delivered" and entry["attempts"] == 1 and entry["response_status"] == 200
    assert entry["payload"] == run


async def test_retries_on_500_then_delivers_with_the_same_delivery_id(api, receiver):
    rec = await receiver([500, 502])
    response, hook = await api.post("/v1/webhooks", json={"url": rec.url})
    ids = await emit(api.app, hook_tenant(api), "run.completed", {"id": "run_2"})
    await asyncio.wait_for(rec.event.wait(), 5)
    assert len(rec.calls) == 3
    assert {c["headers"]["X-Svc-Delivery"] for c in rec.calls} == {ids[0]}
    entry = await wait_status(api, hook["id"], "delivered")
    assert entry["attempts"] == 3


async def test_gives_up_after_three_retries_and_does_not_retry_4xx(api, receiver):
    rec = await receiver([500, 500, 500, 500, 500])
    response, hook = await api.post("/v1/webhooks", json={"url": rec.url})
    await emit(api.app, hook_tenant(api), "run.completed", {"id": "run_3"})
    entry = await wait_status(api, hook["id"], "failed")
    assert len(rec.calls) == 4  # the first attempt + 3 retries
    assert entry["response_status"] == 500 and entry["attempts"] == 4

    rec4 = await receiver([404])
    response, hook4 = await api.post("/v1/webhooks", json={"url": rec4.url})
    await api.delete(f"/v1/webhooks/{hook['id']}")
    await emit(api.app, hook_tenant(api), "run.completed", {"id": "run_4"})
    entry = await wait_status(api, hook4["id"], "failed")
    assert len(rec4.calls) == 1 and entry["attempts"] == 1 and entry["response_status"] == 404


async def test_network_errors_are_retried(api, unused_tcp_port):
    response, hook = await api.post("/v1/webhooks", json={"url": f"http://127.0.0.1:{unused_tcp_port}/hook"})
    await emit(api.app, hook_tenant(api), "run.completed", {"id": "run_5"})
    entry = await wait_status(api, hook["id"], "failed")
    assert entry["attempts"] == 4 and entry["response_status"] is None and entry["error"]


def test_sign_and_verify_round_trip_and_expiry():
    header = sign("k", b"{}", timestamp=1_000_000)
    assert header.startswith("t=1000000,v1=")
    assert verify("k", header, b"{}", now=1_000_100)
    assert not verify("k", header, b"{}", now=1_000_000 + 301)
    assert not verify("k", "garbage", b"{}")
