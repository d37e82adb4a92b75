"""Behaviors through the real app and store: create, list, get, delete, verdicts and stats."""
from __future__ import annotations

import pytest

BINARY = {"name": "refuses politely", "kind": "binary", "baseline_pct": 0.2, "baseline_direction": "above"}


async def behavior(api, **fields) -> dict:
    response, created = await api.post("/v1/behaviors", json={**BINARY, **fields})
    assert response.status == 201, created
    return created


async def test_created_behavior_has_its_fields_and_an_open_latch(api):
    created = await behavior(api, notify="webhook", webhook_url="http://127.0.0.1:9/h")
    del created["id"], created["created_at"], created["secret"]
    assert created == {"name": "refuses politely", "description": None, "kind": "binary", "judge_id": None, "rule_id": None,
                       "labels": None, "baseline_pct": 0.2, "baseline_direction": "above", "notify": "webhook",
                       "slack_channel": None, "webhook_url": "http://127.0.0.1:9/h", "email_to": None, "breached": False}


@pytest.mark.parametrize("change, field", [
    ({"kind": "classifier"}, "judge_id"),
    ({"notify": "email"}, "email_to"),
    ({"baseline_pct": 1.5}, "baseline_pct"),
    ({"baseline_direction": "sideways"}, "baseline_direction"),
])
async def test_bad_behavior_is_400_naming_the_field(api, change, field):
    response, body = await api.post("/v1/behaviors", json={**BINARY, **change})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, field)


async def test_verdicts_one_or_a_batch_count_in_the_stats(api):
    created = await behavior(api)
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"detected": True, "trace_id": "trace-1"})
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"detected": False}, {"detected": False},
                                                                                 {"detected": True}]})
    _, stats = await api.get(f"/v1/behaviors/{created['id']}/stats")
    assert stats == {"rate": 0.5, "sample": 4, "breached": False, "baseline_pct": 0.2, "baseline_direction": "above"}


async def test_judge_error_verdicts_do_not_count(api):
    created = await behavior(api)
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"detected": True},
                                                                                 {"judge_error": "rate_limited"}]})
    _, stats = await api.get(f"/v1/behaviors/{created['id']}/stats")
    assert (stats["rate"], stats["sample"]) == (1.0, 1)


async def test_stats_cover_the_last_50_verdicts(api):
    created = await behavior(api)
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"detected": True}] * 10})
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"detected": False}] * 50})
    _, stats = await api.get(f"/v1/behaviors/{created['id']}/stats")
    assert (stats["rate"], stats["sample"]) == (0.0, 50)


async def test_a_batch_over_500_is_400_naming_the_limit(api):
    created = await behavior(api)
    response, body = await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"detected": True}] * 501})
    assert (response.status, body["details"]["errors"][0]["loc"], "500" in body["message"]) == (400, "verdicts", True)


async def test_a_verdict_without_detected_is_400(api):
    created = await behavior(api)
    response, body = await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"trace_id": "t"}]})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "verdicts.0")


async def test_a_label_outside_the_behaviors_labels_is_400_naming_the_record(api):
    created = await behavior(api, labels=["toxic", "fine"])
    response, body = await api.post(f"/v1/behaviors/{created['id']}/verdicts",
                                    json={"verdicts": [{"detected": True, "label": "toxic"}, {"detected": False, "label": "meh"}]})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "verdicts.1.label")


async def test_deleted_behavior_is_gone(api):
    created = await behavior(api)
    await api.delete(f"/v1/behaviors/{created['id']}")
    response, _ = await api.get(f"/v1/behaviors/{created['id']}")
    assert response.status == 404


async def test_another_tenants_behavior_is_403(api, other_tenant_key):
    created = await behavior(api)
    response, _ = await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"detected": True}, key=other_tenant_key)
    assert response.status == 403


async def test_list_shows_the_tenants_behaviors(api):
    await behavior(api, name="a")
    await behavior(api, name="b")
    _, page = await api.get("/v1/behaviors")
    assert [b["name"] for b in page["items"]] == ["b", "a"]


async def test_an_unknown_judge_is_404(api):
    response, body = await api.post("/v1/behaviors", json={**BINARY, "kind": "classifier", "judge_id": "jdg_missing"})
    assert (response.status, body["details"]) == (404, {"resource": "judge", "id": "jdg_missing"})
