"""Finding 7: tenant B minted 23 keys and held 1,100 SSE streams; tenant A and /health timed out and
the daemon wrote 3 GB of accept() errors. Now: at most SERVICE_MAX_STREAMS_PER_TENANT open streams
per tenant (429), SERVICE_MAX_KEYS_PER_TENANT keys (409), the rate limit counts per tenant as well as
per key, every event stream ends after SERVICE_STREAM_TIMEOUT, and accept() failures are logged at
most once per ACCEPT_LOG_EVERY_S."""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket

import pytest

from daemon import logs
from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from tests.support.api import Api, api_on, make_settings
from tests.support.experiments import FakeRunner
from tests.support.specs import spec_yaml


async def app_with(aiohttp_client, tmp_path, **overrides) -> Api:
    app = create_app(make_settings(tmp_path / "home", **overrides))
    runner = FakeRunner()
    app[RUN_SCENARIO] = runner
    api = await api_on(aiohttp_client, app)
    api.runner = runner  # type: ignore[attr-defined]
    return api


async def created_experiment(api: Api, key: str | None = None) -> str:
    """An experiment that is created but never run: its stream has nothing to say and never ends
    on its own."""
    await api.upload_yaml(spec_yaml("idle", matrix=[{"mode": "block"}], replicas=1), key=key)
    response, created = await api.post("/v1/experiments", json={"spec_id": "idle"}, key=key)
    assert response.status == 201, created
    return created["id"]


async def open_stream(api: Api, path: str, key: str | None = None):
    return await api.client.get(path, headers=api.headers(key, {"Accept": "text/event-stream"}))


# --- open streams per tenant ----------------------------------------------------------------------


async def test_a_tenant_over_its_stream_cap_gets_429_naming_the_cap(aiohttp_client, tmp_path):
    api = await app_with(aiohttp_client, tmp_path, max_streams_per_tenant=3)
    experiment = await created_experiment(api)
    held = [await open_stream(api, f"/v1/experiments/{experiment}/stream") for _ in range(3)]
    response = await open_stream(api, f"/v1/experiments/{experiment}/stream")
    body = await response.json() if response.status == 429 else {"details": {}, "message": "(a stream was opened)"}
    response.close()
    assert ([r.status for r in held], response.status, body["details"].get("limit"), "SERVICE_MAX_STREAMS_PER_TENANT" in body["message"]) \
        == ([200, 200, 200], 429, 3, True)
    for r in held:
        r.close()


async def test_one_tenants_streams_do_not_use_up_anothers(aiohttp_client, tmp_path):
    api = await app_with(aiohttp_client, tmp_path, max_streams_per_tenant=2)
    response, tenant = await api.post("/v1/tenants", json={"name": "acme"})
    other_key = tenant["key"]["secret"]
    mine = await created_experiment(api)
    theirs = await created_experiment(api, key=other_key)
    held = [await open_stream(api, f"/v1/experiments/{mine}/stream") for _ in range(2)]
    response = await open_stream(api, f"/v1/experiments/{theirs}/stream", key=other_key)
    assert response.status == 200
    for r in held + [response]:
        r.close()


async def test_a_closed_stream_gives_its_slot_back(aiohttp_client, tmp_path):
    api = await app_with(aiohttp_client, tmp_path, max_streams_per_tenant=1, stream_timeout_s=0.3)
    experiment = await created_experiment(api)
    first = await open_stream(api, f"/v1/experiments/{experiment}/stream")
    await asyncio.wait_for(first.read(), 15)  # it ends at the stream timeout
    second = await open_stream(api, f"/v1/experiments/{experiment}/stream")
    assert (first.status, second.status) == (200, 200)
    second.close()


# --- every stream ends ----------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["experiment", "replicas"])
async def test_every_event_stream_ends_after_the_stream_timeout(aiohttp_client, tmp_path, what):
    """Streams of work that never finishes end anyway: the bound on the wait is only how long the
    test waits, the outcome asserted is that the stream closed."""
    api = await app_with(aiohttp_client, tmp_path, stream_timeout_s=0.3)
    if what == "experiment":
        path = f"/v1/experiments/{await created_experiment(api)}/stream"
    else:
        await api.upload_yaml(spec_yaml("idle", matrix=[{"mode": "block"}], replicas=1))
        response, suite = await api.post("/v1/replicas", json={"spec_id": "idle", "n_replicas": 2, "inputs": {"mode": "block"}})
        assert response.status == 202, suite
        path = f"/v1/replicas/{suite['id']}/stream"
    response = await open_stream(api, path)
    try:
        ended = await asyncio.wait_for(response.read(), 15) is not None
    except asyncio.TimeoutError:
        ended = False
    api.runner.release.set()
    assert (response.status, ended) == (200, True)


# --- keys and the rate limit per tenant -----------------------------------------------------------


async def test_a_tenant_cannot_mint_more_keys_than_the_cap(aiohttp_client, tmp_path):
    api = await app_with(aiohttp_client, tmp_path, max_keys_per_tenant=3)  # the bootstrap key is one
    for n in range(2):
        response, body = await api.post("/v1/keys", json={"name": f"k{n}"})
        assert response.status == 201, body
    response, body = await api.post("/v1/keys", json={"name": "one too many"})
    assert (response.status, body["details"]["state"], body["details"]["limit"], "SERVICE_MAX_KEYS_PER_TENANT" in body["message"]) \
        == (409, "limit_reached", 3, True)


async def test_more_keys_buy_a_tenant_no_more_requests(aiohttp_client, tmp_path):
    api = await app_with(aiohttp_client, tmp_path, rate_limit_per_s=0.001, rate_limit_burst=8)
    keys = [api.key]
    for n in range(2):  # two of the tenant's eight requests
        response, body = await api.post("/v1/keys", json={"name": f"k{n}"})
        keys.append(body["secret"])
    statuses = []
    for n in range(12):  # four per key: well under each key's own burst
        response, _ = await api.get("/v1/keys", key=keys[n % 3])
        statuses.append(response.status)
    assert statuses == [200] * 6 + [429] * 6


# --- accept() failures ----------------------------------------------------------------------------


async def test_accept_failures_are_logged_once_not_per_retry(aiohttp_client, tmp_path, caplog, monkeypatch):
    """The real thing: the process is out of file descriptors while connections keep arriving, so
    the server's accept() fails again at every retry (retries sped up to every 20 ms)."""
    api = await app_with(aiohttp_client, tmp_path)
    throttle = logs.throttle_accept_errors()
    monkeypatch.setattr(throttle, "last", None)
    monkeypatch.setattr(throttle, "suppressed", 0)
    monkeypatch.setattr(asyncio.constants, "ACCEPT_RETRY_DELAY", 0.02)
    host, port = api.client.server.host, api.client.server.port
    clients = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(20)]
    for sock in clients:
        sock.setblocking(False)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    probe = os.dup(0)  # the lowest free descriptor: with the limit there, no new one can be made
    os.close(probe)
    caplog.set_level(logging.ERROR, logger="asyncio")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (probe, hard))
        for sock in clients:
            code = sock.connect_ex((host, port))
            assert code in (0, errno.EINPROGRESS), code
        await asyncio.sleep(0.5)  # the loop keeps retrying accept() meanwhile
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        for sock in clients:
            sock.close()
    logged = [r for r in caplog.records if r.name == "asyncio" and logs.AcceptErrorThrottle.is_accept_error(r)]
    assert (len(logged), throttle.suppressed > 5) == (1, True)
