"""The behavior latch end to end: verdicts in, one breach notice and one recovery notice out to a
real HTTP receiver, counted and compared exactly."""
from __future__ import annotations

import asyncio

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.receivers import HttpReceiver
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "0.05")


@pytest.fixture
async def receiver():
    receiver = await HttpReceiver().start()
    yield receiver
    await receiver.stop()


async def watched(api, url: str) -> dict:
    response, created = await api.post("/v1/behaviors", json={
        "name": "leaks secrets", "kind": "binary", "baseline_pct": 0.2, "baseline_direction": "above",
        "notify": "webhook", "webhook_url": url})
    assert response.status == 201, created
    return created


async def verdicts(api, behavior_id: str, *detected: bool) -> dict:
    response, body = await api.post(f"/v1/behaviors/{behavior_id}/verdicts", json={"verdicts": [{"detected": d} for d in detected]})
    assert response.status == 201, body
    return body


async def notices(api, behavior_id: str, n: int, timeout: float = 10.0) -> list[dict]:
    """The behavior's notifications once `n` exist and none is pending."""
    async def settled():
        _, page = await api.get(f"/v1/behaviors/{behavior_id}/deliveries")
        items = page["items"]
        return items if len(items) >= n and all(d["status"] != "pending" for d in items) else None
    return await wait_for(settled, timeout=timeout, what=f"{n} settled notifications")


async def test_19_breaching_verdicts_send_nothing(api, receiver):
    created = await watched(api, receiver.url)
    body = await verdicts(api, created["id"], *[True] * 19)
    _, page = await api.get(f"/v1/behaviors/{created['id']}/deliveries")
    assert (body["stats"]["breached"], page["items"], receiver.calls) == (False, [], [])


async def test_the_crossing_verdict_sends_one_breach_notice(api, receiver):
    created = await watched(api, receiver.url)
    await verdicts(api, created["id"], *[True] * 19)
    await verdicts(api, created["id"], True)
    await notices(api, created["id"], 1)
    [call] = receiver.calls
    assert (call["headers"]["X-Svc-Event"], call["body"]) == ("behavior.breached", {
        "rule_id": created["id"], "rule_name": "leaks secrets",
        "reason": "detection rate 1 above baseline 0.2 over the last 50 verdicts", "experiment_id": None,
        "experiment_name": None, "fired_at": call["body"]["fired_at"], "metric_value": 1.0, "threshold": 0.2})


async def test_ten_more_breaching_verdicts_send_nothing_more(api, receiver):
    created = await watched(api, receiver.url)
    await verdicts(api, created["id"], *[True] * 20)
    await notices(api, created["id"], 1)
    for _ in range(10):
        await verdicts(api, created["id"], True)
    await asyncio.sleep(0.3)
    _, page = await api.get(f"/v1/behaviors/{created['id']}/deliveries")
    assert (page["count"], len(receiver.calls)) == (1, 1)


async def test_recovery_resets_the_latch_with_one_recovery_notice(api, receiver):
    created = await watched(api, receiver.url)
    await verdicts(api, created["id"], *[True] * 20)
    body = await verdicts(api, created["id"], *[False] * 50)
    await notices(api, created["id"], 2)
    assert (body["stats"]["breached"], [c["headers"]["X-Svc-Event"] for c in receiver.calls]) == (
        False, ["behavior.breached", "behavior.recovered"])


async def test_the_latch_survives_a_restart(aiohttp_client, tmp_path, receiver):
    home = tmp_path / "home"
    api = await api_on(aiohttp_client, create_app(make_settings(home)))
    created = await watched(api, receiver.url)
    await verdicts(api, created["id"], *[True] * 20)
    await notices(api, created["id"], 1)
    await api.client.close()
    api = await api_on(aiohttp_client, create_app(make_settings(home)))
    body = await verdicts(api, created["id"], *[True] * 5)
    await asyncio.sleep(0.3)
    assert (body["stats"]["breached"], len(receiver.calls)) == (True, 1)


async def watched_either(api, url: str) -> dict:
    response, created = await api.post("/v1/behaviors", json={
        "name": "drifts", "kind": "binary", "baseline_pct": 0.5, "baseline_direction": "either",
        "notify": "webhook", "webhook_url": url})
    assert response.status == 201, created
    return created


async def test_either_stays_quiet_on_the_side_it_settled_on(api, receiver):
    created = await watched_either(api, receiver.url)
    body = await verdicts(api, created["id"], *[False] * 30)
    _, page = await api.get(f"/v1/behaviors/{created['id']}/deliveries")
    assert (body["stats"]["breached"], page["items"]) == (False, [])


async def test_either_notifies_a_crossing_upward_once(api, receiver):
    created = await watched_either(api, receiver.url)
    await verdicts(api, created["id"], *[False] * 20)  # settles below 0.5
    await verdicts(api, created["id"], *[True] * 30)  # 30 of 50: above
    await verdicts(api, created["id"], *[True] * 5)
    await notices(api, created["id"], 1)
    assert [(c["headers"]["X-Svc-Event"], c["body"]["reason"]) for c in receiver.calls] == [
        ("behavior.breached", "detection rate 0.6 above baseline 0.5 over the last 50 verdicts")]


async def test_either_notifies_a_crossing_downward_and_its_recovery(api, receiver):
    created = await watched_either(api, receiver.url)
    await verdicts(api, created["id"], *[True] * 20)  # settles above 0.5
    await verdicts(api, created["id"], *[False] * 30)  # 20 of 50: below
    await verdicts(api, created["id"], *[True] * 30)  # 30 of the last 50: above again
    await notices(api, created["id"], 2)
    assert [c["headers"]["X-Svc-Event"] for c in receiver.calls] == ["behavior.breached", "behavior.recovered"]
