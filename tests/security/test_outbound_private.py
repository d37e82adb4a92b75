"""A tenant points a webhook or an alert at the daemon's own host or its private networks (local
tools, the host's ports): refused at registration (400 naming the field) and at connect time, unless
the operator sets SERVICE_OUTBOUND_ALLOW_PRIVATE=1 (daemon/netguard.py). These apps run without it."""
from __future__ import annotations

import socket

import aiohttp
import pytest

from daemon import netguard
from tests.support.api import make_settings
from tests.support.receivers import HttpReceiver


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path / "home", outbound_allow_private=False)


def host_address() -> str:
    """This host's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        return s.getsockname()[0]


PRIVATE_URLS = ["http://127.0.0.1:8080/hook", "http://127.1.2.3/hook", "http://[::1]:8080/hook", "http://localhost:8080/hook",
                "http://0.0.0.0:8080/hook", "http://10.0.0.5/hook", "http://172.16.0.1/hook", "http://192.168.1.1/hook",
                "http://[fc00::1]/hook", "http://[::ffff:127.0.0.1]/hook", "http://2130706433/hook"]


@pytest.mark.parametrize("url", PRIVATE_URLS)
async def test_a_webhook_to_a_loopback_or_private_address_is_refused_naming_url(api, url):
    response, body = await api.post("/v1/webhooks", json={"url": url})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "url"), body


async def test_a_webhook_to_the_hosts_own_interface_address_is_refused_naming_url(api):
    response, body = await api.post("/v1/webhooks", json={"url": f"http://{host_address()}:8080/hook"})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "url"), body


async def test_an_alert_to_a_private_address_is_refused_naming_webhook_url(api):
    response, body = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.8", "notify": "webhook",
                                                        "webhook_url": "http://192.168.1.1:8080/hook"})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "webhook_url"), body


async def test_a_name_that_turns_into_loopback_at_connect_time_is_not_called(api, monkeypatch):
    """DNS rebinding: public when registered and checked, 127.0.0.1 when the send connects."""
    receiver = await HttpReceiver().start()
    port = int(receiver.url.split(":")[2].split("/")[0])

    async def public(host, port):
        return ["93.184.216.34"]

    class Rebound(aiohttp.ThreadedResolver):
        async def resolve(self, host, port=0, family=socket.AF_INET):
            return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": socket.AF_INET, "proto": 0, "flags": 0}]

    monkeypatch.setattr(netguard, "resolve_host", public)
    monkeypatch.setattr(netguard.aiohttp, "ThreadedResolver", Rebound)
    try:
        _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.8", "notify": "webhook",
                                                     "webhook_url": f"http://rebind.test:{port}/hook"})
        await api.post(f"/v1/alerts/{rule['id']}/test")
        assert receiver.calls == []
    finally:
        await receiver.stop()
