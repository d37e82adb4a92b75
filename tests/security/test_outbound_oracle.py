"""A tenant uses `POST /v1/alerts/{id}/test` (or a delivery log) as a port scanner: the recorded
error is the same text whether the port is closed, the peer hangs up, the peer never answers or the
name does not resolve, so the answer says nothing about what listens where (daemon/netguard.py
NO_ANSWER). The operator allows private destinations here, so the probes reach 127.0.0.1."""
from __future__ import annotations

import asyncio
import socket

import pytest

from tests.support.api import make_settings


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path / "home", outbound_allow_private=True)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_test_sends_to_closed_silent_and_hanging_up_ports_answer_alike(api, monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_TIMEOUT_S", "0.3")
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "60")  # only the attempt made by /test

    async def hang_up(reader, writer):
        writer.close()

    async def silent(reader, writer):
        await asyncio.sleep(5)
        writer.close()

    closer = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    sleeper = await asyncio.start_server(silent, "127.0.0.1", 0)
    targets = [f"http://127.0.0.1:{closed_port()}/hook", f"http://127.0.0.1:{closer.sockets[0].getsockname()[1]}/hook",
               f"http://127.0.0.1:{sleeper.sockets[0].getsockname()[1]}/hook", "http://no-such-host.invalid/hook"]
    errors = []
    try:
        for n, url in enumerate(targets):
            _, rule = await api.post("/v1/alerts", json={"name": f"probe {n}", "condition": "pass_rate < 0.8",
                                                         "notify": "webhook", "webhook_url": url})
            _, answer = await api.post(f"/v1/alerts/{rule['id']}/test")
            errors.append(answer["delivery"]["attempt_log"][0]["error"])
    finally:
        closer.close()
        sleeper.close()
    assert len(set(errors)) == 1, errors
