"""Webhook URLs never reach link-local or cloud metadata addresses: refused at registration (400
naming `url`) and again at delivery time, without sending (DNS can change in between)."""
from __future__ import annotations

import pytest
from aiohttp import web

from daemon import netguard
from daemon.webhooks import emit
from tests.support.waiting import wait_for
from daemon.appkeys import DEFAULT_TENANT_ID, STORE

REFUSED = [
    "http://169.254.169.254/latest/meta-data/iam",
    "http://169.254.10.1:8080/x",
    "https://[fe80::1]/hook",
    "http://[fe80::1%25eth0]:80/hook",
    "http://[fd00:ec2::254]/latest",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.google.internal./",
    "http://100.100.100.200/latest/meta-data",
    "http://2852039166/",  # 169.254.169.254 as one decimal number: the resolver says so
    "http://0xa9.0xfe.0xa9.0xfe/",
]
ALLOWED = ["http://127.0.0.1:9/hook", "http://localhost:9/hook", "http://[::1]:9/hook", "https://example.invalid/hook",
           "http://10.1.2.3/x"]


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setenv("SERVICE_WEBHOOK_BACKOFF_S", "0.01")


async def test_registration_refuses_link_local_and_metadata_urls(api):
    for url in REFUSED:
        response, body = await api.post("/v1/webhooks", json={"url": url})
        assert response.status == 400, (url, body)
        assert body["error"] == "invalid_request" and body["details"]["errors"][0]["loc"] == "url", (url, body)
        assert body["message"].startswith("url: "), body
    for url in ALLOWED:
        response, body = await api.post("/v1/webhooks", json={"url": url})
        assert response.status == 201, (url, body)


async def test_a_name_resolving_to_metadata_is_refused(api, monkeypatch):
    async def fake_dns(host, port):
        return {"evil.test": ["93.184.216.34", "169.254.169.254"], "v6.test": ["fe80::1"]}.get(host, ["127.0.0.1"])

    monkeypatch.setattr(netguard, "resolve_host", fake_dns)
    for url in ("http://evil.test/hook", "http://v6.test:8080/hook"):
        response, body = await api.post("/v1/webhooks", json={"url": url})
        assert response.status == 400 and "resolves to" in body["message"], body
    response, body = await api.post("/v1/webhooks", json={"url": "http://fine.test/hook"})
    assert response.status == 201


async def test_delivery_checks_again_and_refuses_without_sending(api, aiohttp_server, monkeypatch):
    calls = []

    async def handle(request: web.Request) -> web.Response:
        calls.append(await request.read())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", handle)
    server = await aiohttp_server(app)
    answers = {"hooks.test": ["127.0.0.1"]}

    async def fake_dns(host, port):
        return answers.get(host, ["127.0.0.1"])

    monkeypatch.setattr(netguard, "resolve_host", fake_dns)
    response, hook = await api.post("/v1/webhooks", json={"url": f"http://hooks.test:{server.port}/hook"})
    assert response.status == 201, hook
    answers["hooks.test"] = ["169.254.169.254"]  # the name now points at the metadata service
    await emit(api.app, api.app[DEFAULT_TENANT_ID], "run.completed", {"id": "run_1"})
    async def settled_row():
        row = await api.app[STORE].fetchone("SELECT * FROM webhook_deliveries WHERE webhook_id = ?", (hook["id"],))
        return row if row is not None and row["status"] != "pending" else None
    row = await wait_for(settled_row, what="the delivery to settle")
    assert row["status"] == "failed" and row["attempts"] == 1, dict(row)  # refused: never retried
    assert "refused, not sent" in row["error"] and "169.254.169.254" in row["error"]
    assert calls == []


async def test_the_resolver_refuses_at_connect_time():
    class Inner:
        async def resolve(self, host, port=0, family=0):
            return [{"hostname": host, "host": "169.254.169.254", "port": port, "family": 2, "proto": 0, "flags": 0}]

        async def close(self):
            pass

    resolver = netguard.GuardedResolver(Inner())
    with pytest.raises(OSError, match="169.254.169.254"):
        await resolver.resolve("rebinding.test", 80)
    with pytest.raises(OSError, match="metadata"):
        await resolver.resolve("metadata.google.internal", 80)


def test_forbidden_address():
    assert netguard.forbidden_address("169.254.169.254")
    assert netguard.forbidden_address("fe80::abcd")
    assert netguard.forbidden_address("::ffff:169.254.1.1")
    assert netguard.forbidden_address("fd00:ec2::254")
    for ok in ("127.0.0.1", "::1", "10.0.0.1", "192.168.1.1", "8.8.8.8", "fd00:ec2::253", "not-an-ip"):
        assert netguard.forbidden_address(ok) is None, ok
