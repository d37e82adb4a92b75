"""Stream events are validated against their stream's declared model (RouteInfo.events) the way
answers are (daemon.http.render): an event that does not match is logged and, with
SERVICE_RESPONSE_VALIDATION strict (the default), never sent: the stream ends with an error frame."""
from __future__ import annotations

import logging

from daemon.app import create_app
from daemon.runner import records
from daemon.runner.scenario import topic
from tests.support.api import api_on, make_settings
from tests.support.specs import SPEC_YAML
from tests.support.sse import parse_sse
from daemon.appkeys import DEFAULT_TENANT_ID, EVENTS, STORE


async def _running(aiohttp_client, tmp_path, *events):
    api = await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", stream_timeout_s=0.5)))
    await api.upload_yaml(SPEC_YAML, name="hello")
    store = api.app[STORE]
    await records.insert(store, run_id="run_x", tenant_id=api.app[DEFAULT_TENANT_ID], spec_id="hello", spec_version=1, seed="s")
    await records.update(store, "run_x", status="running")
    for event in events:
        api.app[EVENTS].publish(topic("run_x"), event)
    response = await api.client.get("/v1/runs/run_x/stream", headers=api.headers())
    assert response.status == 200
    return parse_sse(await response.text())


async def test_events_matching_the_model_pass_unchanged(aiohttp_client, tmp_path):
    events = await _running(aiohttp_client, tmp_path, {"type": "step", "step": "agent", "extra": [1]})
    assert events == [{"event": None, "id": None, "data": {"type": "step", "step": "agent", "extra": [1]}}]


async def test_a_mismatching_event_ends_the_stream_loudly(aiohttp_client, tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("SERVICE_RESPONSE_VALIDATION", raising=False)
    with caplog.at_level(logging.ERROR, logger="svcd.http"):
        events = await _running(aiohttp_client, tmp_path, {"type": "step"}, {"kind": "no type"}, {"type": "done"})
    assert events[0]["data"] == {"type": "step"}
    assert len(events) == 2  # the bad event is not sent, nor anything after it
    assert events[1]["event"] == "error"
    assert events[1]["data"]["error"] == "internal_error" and "RunEvent" in events[1]["data"]["message"]
    assert any("does not match RunEvent" in r.getMessage() for r in caplog.records)


async def test_warn_mode_logs_and_sends_it(aiohttp_client, tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("SERVICE_RESPONSE_VALIDATION", "warn")
    with caplog.at_level(logging.ERROR, logger="svcd.http"):
        events = await _running(aiohttp_client, tmp_path, {"kind": "no type"}, {"type": "done"})
    assert [e["data"] for e in events] == [{"kind": "no type"}, {"type": "done"}]
    assert any("does not match RunEvent" in r.getMessage() for r in caplog.records)


# --- NDJSON streams share the mechanism (daemon.sse.ndjson_response) ------------------------------

async def _ndjson_app(aiohttp_client, rows):
    from aiohttp import web
    from pydantic import BaseModel, ConfigDict

    from daemon.http import Routes
    from daemon.middleware import request_id_and_errors
    from daemon.sse import ndjson_response

    class Item(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n: int

    routes = Routes("test")

    @routes.get("/items", "items", stream="application/x-ndjson", events=Item)
    async def items(request):
        async def gen():
            for row in rows:
                yield row
        return await ndjson_response(request, gen())

    app = web.Application(middlewares=[request_id_and_errors])
    for info in routes.items:
        info.handler.route_info = info
        app.router.add_route(info.method, info.path, info.handler)
    return await aiohttp_client(app)


async def test_ndjson_rows_are_validated_too(aiohttp_client, caplog, monkeypatch):
    import aiohttp
    import pytest

    monkeypatch.delenv("SERVICE_RESPONSE_VALIDATION", raising=False)
    client = await _ndjson_app(aiohttp_client, [{"n": 1}, {"n": 2}])
    response = await client.get("/items")
    assert await response.text() == '{"n":1}\n{"n":2}\n'

    client = await _ndjson_app(aiohttp_client, [{"n": 1}, {"n": "x", "surprise": True}])
    with caplog.at_level(logging.ERROR, logger="svcd.http"):
        response = await client.get("/items")
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):  # the body is cut, never the bad row
            await response.read()
    assert any("does not match Item" in r.getMessage() for r in caplog.records)

    monkeypatch.setenv("SERVICE_RESPONSE_VALIDATION", "warn")
    client = await _ndjson_app(aiohttp_client, [{"n": "x"}])
    response = await client.get("/items")
    assert await response.text() == '{"n":"x"}\n'
