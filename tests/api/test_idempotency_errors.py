"""Idempotency-Key stores error answers too and honours SERVICE_IDEMPOTENCY_TTL.

A 4xx answer (400, 404, ...) is stored and replayed on a retry with the same key: same status,
same body (the first request's request_id included), header `Idempotent-Replayed: true`. 409, 429
and 5xx are not stored: a retry runs the request again. Entries older than the TTL are not replayed.
"""
from __future__ import annotations

import asyncio
import sqlite3

from daemon.app import create_app
from daemon.config import Settings
from tests.support.api import api_on, make_settings
from tests.support.specs import SPEC_YAML
from daemon.appkeys import IDEMPOTENCY_LOCKS


def stored_keys(db_path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return {key: status for key, status in con.execute("SELECT key, status FROM idempotency")}
    finally:
        con.close()


async def test_a_4xx_is_stored_and_replayed_with_the_same_body(api, settings):
    headers = {"Idempotency-Key": "run-nope-1"}
    first, body = await api.post("/v1/runs", json={"spec_id": "hello"}, headers=headers)
    assert first.status == 404 and body["details"] == {"resource": "spec", "id": "hello"}
    assert "Idempotent-Replayed" not in first.headers
    await api.upload_yaml(SPEC_YAML, name="hello")  # the request would now succeed: the retry still replays the 404
    again, replay = await api.post("/v1/runs", json={"spec_id": "hello"}, headers=headers)
    assert again.status == 404 and again.headers["Idempotent-Replayed"] == "true"
    assert replay == body  # the very same body, request_id included
    assert stored_keys(settings.db_path)["run-nope-1"] == 404

    # a 400 (invalid body) is stored too
    first, body = await api.post("/v1/runs", json={}, headers={"Idempotency-Key": "run-bad-1"})
    again, replay = await api.post("/v1/runs", json={}, headers={"Idempotency-Key": "run-bad-1"})
    assert first.status == again.status == 400 and replay == body and again.headers["Idempotent-Replayed"] == "true"
    # the same key with another request is still a conflict
    other, conflict = await api.post("/v1/runs", json={"spec_id": "x"}, headers={"Idempotency-Key": "run-bad-1"})
    assert other.status == 409 and conflict["details"]["state"] == "used"


async def test_a_409_is_not_stored(api, settings):
    response, _ = await api.post("/v1/tenants", json={"name": "acme"})
    assert response.status == 201
    first, body = await api.post("/v1/tenants", json={"name": "acme"}, headers={"Idempotency-Key": "t-dup"})
    assert first.status == 409 and body["details"]["state"] == "exists"
    again, replay = await api.post("/v1/tenants", json={"name": "acme"}, headers={"Idempotency-Key": "t-dup"})
    assert again.status == 409 and "Idempotent-Replayed" not in again.headers
    assert replay["request_id"] != body["request_id"]  # answered again, not replayed
    assert "t-dup" not in stored_keys(settings.db_path)
    assert not api.app[IDEMPOTENCY_LOCKS]


def test_the_ttl_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("SERVICE_IDEMPOTENCY_TTL", raising=False)
    assert Settings.from_env().idempotency_ttl_s == 24 * 3600
    monkeypatch.setenv("SERVICE_IDEMPOTENCY_TTL", "60")
    assert Settings.from_env().idempotency_ttl_s == 60


async def test_expired_entries_are_not_replayed(aiohttp_client, tmp_path):
    api = await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", idempotency_ttl_s=1)))
    headers = {"Idempotency-Key": "short-lived"}
    first, body = await api.post("/v1/runs", json={"spec_id": "nope"}, headers=headers)
    again, replay = await api.post("/v1/runs", json={"spec_id": "nope"}, headers=headers)
    assert first.status == again.status == 404 and replay == body and again.headers["Idempotent-Replayed"] == "true"
    await asyncio.sleep(1.2)
    late, fresh = await api.post("/v1/runs", json={"spec_id": "nope"}, headers=headers)
    assert late.status == 404 and "Idempotent-Replayed" not in late.headers
    assert fresh["request_id"] != body["request_id"]  # run again: a new answer
    # and the new answer is the one stored now
    again, replay = await api.post("/v1/runs", json={"spec_id": "nope"}, headers=headers)
    assert again.headers["Idempotent-Replayed"] == "true" and replay == fresh
