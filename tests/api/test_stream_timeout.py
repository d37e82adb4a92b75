"""GET /v1/runs/{id}/stream closes after SERVICE_STREAM_TIMEOUT seconds even if the run goes on
(SPEC: "The stream closes when the run reaches a terminal state or after a configured timeout")."""
from __future__ import annotations

import time

from daemon.app import create_app
from daemon.config import Settings
from daemon.runner import records
from daemon.runner.scenario import topic
from tests.support.api import api_on, make_settings
from tests.support.specs import SPEC_YAML
from tests.support.sse import sse_data
from daemon.appkeys import DEFAULT_TENANT_ID, EVENTS, STORE


def test_the_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("SERVICE_STREAM_TIMEOUT", raising=False)
    assert Settings.from_env().stream_timeout_s == 1800
    monkeypatch.setenv("SERVICE_STREAM_TIMEOUT", "7")
    assert Settings.from_env().stream_timeout_s == 7


async def test_the_stream_of_a_run_still_going_closes_after_the_timeout(aiohttp_client, tmp_path):
    api = await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", stream_timeout_s=0.6)))
    await api.upload_yaml(SPEC_YAML, name="hello")
    store = api.app[STORE]
    await records.insert(store, run_id="run_long", tenant_id=api.app[DEFAULT_TENANT_ID], spec_id="hello", spec_version=1, seed="s")
    await records.update(store, "run_long", status="running")
    api.app[EVENTS].publish(topic("run_long"), {"type": "step", "step": "agent"})

    started = time.monotonic()
    response = await api.client.get("/v1/runs/run_long/stream", headers=api.headers())
    assert response.status == 200 and response.headers["Content-Type"] == "text/event-stream"
    events = sse_data(await response.text())
    elapsed = time.monotonic() - started
    assert events == [{"type": "step", "step": "agent"}]  # what was published, then the end of the stream
    assert 0.5 <= elapsed < 5, elapsed
    _, run = await api.get("/v1/runs/run_long")
    assert run["status"] == "running"  # the run goes on; only the stream ended
    assert not api.app[EVENTS].subscribers[topic("run_long")]  # the closed stream unsubscribed
