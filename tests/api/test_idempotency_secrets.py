"""A one-time secret is never kept by the idempotency store and never shown twice.

Routes flagged `secret_once` in the route registry (API key creation and rotation, tenant creation,
webhook creation) answer a replay of the same request with 409 `conflict` naming the resource the
first request created; the idempotency table holds only that marker.
"""
from __future__ import annotations

import sqlite3

from daemon.middleware import SECRET_MARKER_TYPE


def idempotency_dump(db_path) -> str:
    """Every byte of the idempotency table, as sqlite3 reads it from svc.db (and its WAL)."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT * FROM idempotency").fetchall()
    finally:
        con.close()
    out = []
    for row in rows:
        for value in row:
            out.append(value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value))
    return "\n".join(out)


async def test_replays_of_secret_routes_are_409_naming_the_resource(api, settings):
    secrets: list[str] = []

    async def twice(path: str, json: dict, key: str, status: int = 201):
        headers = {"Idempotency-Key": key}
        first, created = await api.post(path, json=json, headers=headers)
        assert first.status == status, created  # creation is 201; a rotation answers 200 with the new secret
        again, replay = await api.post(path, json=json, headers=headers)
        assert again.status == 409, replay
        assert replay["error"] == "conflict" and replay["request_id"]
        assert replay["details"]["state"] == "secret_shown_once"
        assert "shown once" in replay["message"]
        return created, replay

    created, replay = await twice("/v1/keys", {"name": "ci"}, "k-1")
    secrets.append(created["secret"])
    assert replay["details"]["resource"] == "key" and replay["details"]["id"] == created["id"]
    assert created["secret"] not in str(replay)

    rotated, replay = await twice(f"/v1/keys/{created['id']}/rotate", {}, "k-2", status=200)
    secrets.append(rotated["secret"])
    assert replay["details"] == {"state": "secret_shown_once", "resource": "key", "id": created["id"]}

    tenant, replay = await twice("/v1/tenants", {"name": "acme"}, "t-1")
    secrets.append(tenant["key"]["secret"])
    assert replay["details"]["resource"] == "tenant" and replay["details"]["id"] == tenant["id"]

    hook, replay = await twice("/v1/webhooks", {"url": "http://127.0.0.1:9/hook", "secret": "whsec_chosen_by_me_123"}, "w-1")
    secrets.append(hook["secret"])
    assert replay["details"]["resource"] == "webhook" and replay["details"]["id"] == hook["id"]

    # still exactly one of each
    _, keys = await api.get("/v1/keys")
    assert [k["name"] for k in keys["items"]].count("ci") == 1
    _, hooks = await api.get("/v1/webhooks")
    assert hooks["count"] == 1

    # the rotated secret works, the first one no longer does
    response, _ = await api.get("/v1/keys", key=rotated["secret"])
    assert response.status == 200
    response, _ = await api.get("/v1/keys", key=created["secret"])
    assert response.status == 401

    dump = idempotency_dump(settings.db_path)
    assert dump.count(SECRET_MARKER_TYPE) == 4
    for secret in secrets:
        assert secret not in dump
        assert secret[-16:] not in dump
    # API keys are stored hashed: no byte of them anywhere in the database files
    for suffix in ("", "-wal"):
        path = settings.db_path.parent / (settings.db_path.name + suffix)
        if path.exists():
            data = path.read_bytes()
            for secret in secrets[:3]:
                assert secret.encode() not in data, (path.name, secret[:13])


async def test_a_different_body_under_the_same_key_is_still_the_usual_conflict(api):
    headers = {"Idempotency-Key": "k-9"}
    response, created = await api.post("/v1/keys", json={"name": "one"}, headers=headers)
    assert response.status == 201
    response, body = await api.post("/v1/keys", json={"name": "two"}, headers=headers)
    assert response.status == 409 and body["details"]["state"] == "used"


async def test_a_refused_secret_request_can_be_sent_again(api):
    headers = {"Idempotency-Key": "k-bad"}
    first, a = await api.post("/v1/keys", json={"name": ""}, headers=headers)
    second, b = await api.post("/v1/keys", json={"name": ""}, headers=headers)
    assert first.status == second.status == 400
    assert a["error"] == b["error"] == "invalid_request"


async def test_openapi_documents_the_rule(api):
    response = await api.client.get("/v1/openapi.json")
    doc = await response.json()
    for path, method in (("/v1/keys", "post"), ("/v1/keys/{key_id}/rotate", "post"), ("/v1/tenants", "post"),
                         ("/v1/webhooks", "post")):
        operation = doc["paths"][path][method]
        assert "409" in operation["responses"], path
        assert "secret_shown_once" in operation["description"], path
