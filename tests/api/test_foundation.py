"""Middlewares, errors, auth, keys, idempotency, rate limits, pagination, OpenAPI."""
from __future__ import annotations

import asyncio

from daemon.app import create_app
from tests.support.api import make_settings
from tests.support.specs import SPEC_YAML
from daemon.appkeys import DEFAULT_TENANT_ID, STORE


async def test_health_needs_no_auth_and_reports_version(api):
    for path in ("/health", "/v1/health"):
        response = await api.client.get(path)
        body = await response.json()
        assert response.status == 200
        assert body["status"] == "ok" and body["version"]


async def test_request_id_is_echoed_or_generated(api):
    response, _ = await api.get("/v1/specs", headers={"X-Request-ID": "my-trace-1"})
    assert response.headers["X-Request-ID"] == "my-trace-1"
    response, body = await api.get("/v1/specs/nope")
    assert response.headers["X-Request-ID"].startswith("req_")
    assert body["request_id"] == response.headers["X-Request-ID"]


async def test_missing_and_invalid_keys_are_401(api):
    response = await api.client.get("/v1/specs")
    body = await response.json()
    assert response.status == 401 and body["error"] == "unauthorized" and "missing" in body["message"]
    response, body = await api.get("/v1/specs", key="svc_live_notarealkeynotarealkeynotareal")
    assert response.status == 401 and body["error"] == "unauthorized"
    response, body = await api.get("/v1/specs", key="garbage")
    assert response.status == 401


async def test_unknown_route_and_method_get_the_error_body(api):
    response, body = await api.get("/v1/nothing-here")
    assert response.status == 404
    assert body["error"] == "not_found" and body["request_id"]
    response, body = await api.call("PATCH", "/v1/specs")
    assert response.status == 405
    assert body["error"] == "method_not_allowed" and "GET" in response.headers["Allow"]


async def test_malformed_json_wrong_type_and_missing_fields(api):
    response, body = await api.post("/v1/keys", data=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status == 400 and body["error"] == "invalid_request" and "malformed JSON" in body["message"]
    response, body = await api.post("/v1/keys", data=b"name=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status == 415 and body["error"] == "unsupported_media_type"
    response, body = await api.post("/v1/keys", json={})
    assert response.status == 400
    assert body["details"]["errors"][0]["loc"] == "name"
    response, body = await api.post("/v1/keys", json={"name": "x", "bogus": 1})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "bogus"


async def test_oversize_body_is_413(aiohttp_client, tmp_path):
    settings = make_settings(tmp_path, max_body_bytes=1024)
    client = await aiohttp_client(create_app(settings))
    from client.config import read_env_file

    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    response = await client.post(
        "/v1/specs", data=b"x" * 4096, headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-yaml"}
    )
    body = await response.json()
    assert response.status == 413
    assert body["error"] == "payload_too_large" and body["details"]["limit_bytes"] == 1024


async def test_key_lifecycle_and_rotation_revokes_old_secret(api):
    response, created = await api.post("/v1/keys", json={"name": "ci"})
    assert response.status == 201 and created["secret"].startswith("svc_live_")
    old = created["secret"]
    response, _ = await api.get("/v1/specs", key=old)
    assert response.status == 200
    response, listing = await api.get("/v1/keys")
    assert all("secret" not in k for k in listing["items"])
    assert {"default", "ci"} <= {k["name"] for k in listing["items"]}
    response, rotated = await api.post(f"/v1/keys/{created['id']}/rotate")
    assert response.status == 200 and rotated["secret"] != old
    response, body = await api.get("/v1/specs", key=old)
    assert response.status == 401
    response, _ = await api.get("/v1/specs", key=rotated["secret"])
    assert response.status == 200
    response, _ = await api.delete(f"/v1/keys/{created['id']}")
    assert response.status == 204
    response, _ = await api.get("/v1/specs", key=rotated["secret"])
    assert response.status == 401


async def test_keys_are_stored_hashed(api):
    rows = await api.app[STORE].fetchall("SELECT * FROM api_keys")
    for row in rows:
        assert api.key not in " ".join(str(v) for v in tuple(row))


async def test_other_tenants_resources_are_403(api, other_tenant_key):
    response, _ = await api.post("/v1/specs", data=SPEC_YAML, headers={"Content-Type": "application/x-yaml"})
    assert response.status == 201
    # Spec ids are namespaced per tenant: another tenant's `hello` does not exist in this one's
    # namespace (404); resources with generated ids answer 403 (below, tests/api/test_tenants.py).
    response, body = await api.get("/v1/specs/hello", key=other_tenant_key)
    assert response.status == 404 and body["error"] == "not_found"
    response, body = await api.delete("/v1/specs/hello", key=other_tenant_key)
    assert response.status == 404
    response, body = await api.get("/v1/specs", key=other_tenant_key)
    assert body["items"] == []
    response, body = await api.post("/v1/tenants", json={"name": "evil"}, key=other_tenant_key)
    assert response.status == 403


async def test_idempotency_replays_and_conflicts(api):
    headers = {"Idempotency-Key": "abc-123"}
    first, a = await api.post("/v1/specs", json={"name": "hello", "yaml": SPEC_YAML}, headers=headers)
    second, b = await api.post("/v1/specs", json={"name": "hello", "yaml": SPEC_YAML}, headers=headers)
    assert first.status == second.status == 201
    assert a == b and second.headers.get("Idempotent-Replayed") == "true"
    _, versions = await api.get("/v1/specs/hello/versions")
    assert versions["count"] == 1
    response, body = await api.post("/v1/specs", json={"name": "other", "yaml": SPEC_YAML}, headers=headers)
    assert response.status == 409 and body["error"] == "conflict"
    # a secret-returning route is never replayed (tests/api/test_idempotency_secrets.py)
    first, a = await api.post("/v1/keys", json={"name": "once"}, headers={"Idempotency-Key": "key-1"})
    second, b = await api.post("/v1/keys", json={"name": "once"}, headers={"Idempotency-Key": "key-1"})
    assert first.status == 201 and second.status == 409 and b["details"]["id"] == a["id"]
    _, listing = await api.get("/v1/keys")
    assert [k["name"] for k in listing["items"]].count("once") == 1


async def test_concurrent_requests_with_one_idempotency_key_run_once(api):
    headers = {"Idempotency-Key": "race"}
    results = await asyncio.gather(*[api.post("/v1/keys", json={"name": "race"}, headers=headers) for _ in range(5)])
    assert sorted(r[0].status for r in results) == [201, 409, 409, 409, 409]
    ids = {r[1]["id"] if r[0].status == 201 else r[1]["details"]["id"] for r in results}
    assert len(ids) == 1


async def test_rate_limit_answers_429_with_retry_after(aiohttp_client, tmp_path):
    settings = make_settings(tmp_path, rate_limit_per_s=1, rate_limit_burst=3)
    client = await aiohttp_client(create_app(settings))
    from client.config import read_env_file

    headers = {"Authorization": "Bearer " + read_env_file(settings.credentials_path)["SERVICE_API_KEY"]}
    statuses = [(await client.get("/v1/specs", headers=headers)) for _ in range(5)]
    assert [r.status for r in statuses[:3]] == [200, 200, 200]
    limited = statuses[3]
    assert limited.status == 429 and int(limited.headers["Retry-After"]) >= 1
    assert (await limited.json())["error"] == "rate_limited"


async def test_pagination_walks_every_item_once(api):
    for i in range(7):
        await api.post("/v1/keys", json={"name": f"k{i}"})
    seen, cursor = [], None
    while True:
        params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        response, page = await api.get("/v1/keys", params=params)
        assert page["count"] == len(page["items"]) <= 3
        seen += [k["id"] for k in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 8
    response, body = await api.get("/v1/keys", params={"limit": "0"})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "query.limit"
    response, body = await api.get("/v1/keys", params={"cursor": "!!!"})
    assert response.status == 400


async def test_auth_disabled_lets_local_callers_in(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_settings(tmp_path, auth_disabled=True)))
    response = await client.get("/v1/specs")
    assert response.status == 200


async def test_openapi_describes_every_route(api):
    response = await api.client.get("/v1/openapi.json")
    doc = await response.json()
    assert doc["info"]["version"] == "1.0.0"
    served = set()
    for resource in api.app.router.resources():
        info = resource.get_info()
        path = info.get("path") or info.get("formatter")
        for route in resource:
            if route.method != "HEAD":
                served.add((route.method.lower(), path))
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert served <= documented, served - documented
    assert "SpecDocument" in doc["components"]["schemas"] or "SpecUpload" in doc["components"]["schemas"]


async def test_sandbox_token_is_confined_to_its_sandbox(api):
    from daemon.auth import create_sandbox_token

    token = await create_sandbox_token(api.app[STORE], api.app[DEFAULT_TENANT_ID], "sbx_mine")
    response, body = await api.get("/v1/specs", key=token)
    assert response.status == 403 and body["error"] == "forbidden"
    response, body = await api.get("/v1/sandboxes/sbx_other", key=token)
    assert response.status == 403
