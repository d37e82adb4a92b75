"""The tenant's default notification route (SPEC: behavior alert "routing is set at behavior or
workspace level"): behaviors without their own `notify` send their notices there, to a real
HTTP receiver, signed with the route's own secret."""
from __future__ import annotations

import asyncio

import pytest

from daemon.webhooks import verify
from tests.support.receivers import HttpReceiver
from tests.support.waiting import wait_for

ROUTE = "/v1/alerts/default-route"


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "0.05")


@pytest.fixture
async def receiver():
    receiver = await HttpReceiver().start()
    yield receiver
    await receiver.stop()


async def unrouted_behavior(api, **fields) -> dict:
    response, created = await api.post("/v1/behaviors", json={
        "name": "leaks secrets", "kind": "binary", "baseline_pct": 0.2, "baseline_direction": "above", **fields})
    assert response.status == 201, created
    return created


async def breach(api, behavior_id: str) -> dict:
    response, body = await api.post(f"/v1/behaviors/{behavior_id}/verdicts", json={"verdicts": [{"detected": True}] * 20})
    assert response.status == 201, body
    return body


async def settled(api, behavior_id: str, n: int = 1) -> list[dict]:
    async def done():
        _, page = await api.get(f"/v1/behaviors/{behavior_id}/deliveries")
        items = page["items"]
        return items if len(items) >= n and all(d["status"] != "pending" for d in items) else None
    return await wait_for(done, timeout=10, what=f"{n} settled notices")


async def test_put_answers_the_route_with_its_secret_and_get_without(api, receiver):
    response, put = await api.put(ROUTE, json={"notify": "webhook", "webhook_url": receiver.url})
    _, got = await api.get(ROUTE)
    assert (response.status, put["secret"].startswith("whsec_"), "secret" in got, got["webhook_url"]) == (
        200, True, False, receiver.url)


async def test_get_without_a_route_is_404(api):
    response, body = await api.get(ROUTE)
    assert (response.status, body["error"]) == (404, "not_found")


@pytest.mark.parametrize("body, field", [
    ({"notify": "webhook"}, "webhook_url"),
    ({"notify": "email"}, "email_to"),
    ({"notify": "chat"}, "slack_channel"),
    ({"notify": "webhook", "webhook_url": "http://169.254.169.254/latest"}, "webhook_url"),
])
async def test_a_route_missing_its_destination_is_400_naming_it(api, body, field):
    response, answer = await api.put(ROUTE, json=body)
    assert (response.status, answer["details"]["errors"][0]["loc"]) == (400, field)


async def test_a_behavior_without_notify_breaches_to_the_default_route(api, receiver):
    _, route = await api.put(ROUTE, json={"notify": "webhook", "webhook_url": receiver.url})
    created = await unrouted_behavior(api)
    await breach(api, created["id"])
    await settled(api, created["id"])
    [call] = receiver.calls
    assert (call["headers"]["X-Svc-Event"], call["body"]["rule_id"], verify(route["secret"], call["headers"]["X-Svc-Signature"], call["raw"])) == (
        "behavior.breached", created["id"], True)


async def test_a_behavior_with_its_own_notify_ignores_the_default_route(api, receiver):
    own = await HttpReceiver().start()
    try:
        await api.put(ROUTE, json={"notify": "webhook", "webhook_url": receiver.url})
        created = await unrouted_behavior(api, notify="webhook", webhook_url=own.url)
        await breach(api, created["id"])
        await settled(api, created["id"])
        assert (len(own.calls), receiver.calls) == (1, [])
    finally:
        await own.stop()


async def test_without_any_route_the_latch_moves_silently(api):
    created = await unrouted_behavior(api)
    body = await breach(api, created["id"])
    _, page = await api.get(f"/v1/behaviors/{created['id']}/deliveries")
    assert (body["stats"]["breached"], page["items"]) == (True, [])


async def test_a_removed_route_sends_its_pending_notice_nowhere(api, monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "1")  # the retry comes after the route is gone
    failing = await HttpReceiver((500,) * 10).start()
    try:
        await api.put(ROUTE, json={"notify": "webhook", "webhook_url": failing.url})
        created = await unrouted_behavior(api)
        await breach(api, created["id"])
        await failing.wait_calls(1)
        response, _ = await api.delete(ROUTE)
        [notice] = await settled(api, created["id"])
        assert (response.status, notice["status"], notice["last_error"], len(failing.calls)) == (
            204, "failed", "not sent: the tenant's default route was removed", 1)
    finally:
        await failing.stop()


async def test_another_tenants_route_is_not_used(api, receiver, other_tenant_key):
    await api.put(ROUTE, json={"notify": "webhook", "webhook_url": receiver.url})
    response, created = await api.post("/v1/behaviors", key=other_tenant_key, json={
        "name": "theirs", "kind": "binary", "baseline_pct": 0.2, "baseline_direction": "above"})
    assert response.status == 201, created
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", key=other_tenant_key, json={"verdicts": [{"detected": True}] * 20})
    await asyncio.sleep(0.3)
    response, _ = await api.get(ROUTE, key=other_tenant_key)
    assert (response.status, receiver.calls) == (404, [])
