"""Alert rules through the real app and store: create, list, get, delete, validation, limits,
tenants and spec `alerts:`."""
from __future__ import annotations

import pytest

from tests.support.specs import spec_yaml

RULE = {"name": "pass rate low", "condition": "pass_rate < 0.8", "notify": "webhook", "webhook_url": "http://127.0.0.1:9/hook"}


async def test_created_rule_has_the_stored_shape_and_its_secret_once(api):
    response, rule = await api.post("/v1/alerts", json={**RULE, "eval_id": "demo", "window": "last_3_runs"})
    assert response.status == 201, rule
    assert rule["secret"].startswith("whsec_")
    del rule["id"], rule["created_at"], rule["secret"]
    assert rule == {"name": "pass rate low", "eval_id": "demo", "condition": "pass_rate < 0.8", "metric": "pass_rate",
                    "operator": "<", "threshold": 0.8, "window": "last_3_runs", "notify": "webhook", "slack_channel": None,
                    "webhook_url": "http://127.0.0.1:9/hook", "email_to": None, "last_fired_at": None, "state": "no_data",
                    "source": "api"}


async def test_get_never_shows_the_secret(api):
    _, rule = await api.post("/v1/alerts", json=RULE)
    response, again = await api.get(f"/v1/alerts/{rule['id']}")
    assert response.status == 200 and "secret" not in again


@pytest.mark.parametrize("change, field", [
    ({"condition": "pass_rate lt 0.8"}, "condition"),
    ({"condition": "happiness < 0.8"}, "condition"),
    ({"condition": "pass_rate < high"}, "condition"),
    ({"condition": "pass_rate =< 0.8"}, "condition"),
    ({"window": "last_week_or_so"}, "window"),
    ({"window": "last_500_runs"}, "window"),
    ({"webhook_url": None}, "webhook_url"),
    ({"notify": "email"}, "email_to"),
    ({"notify": "chat"}, "slack_channel"),
    ({"webhook_url": "http://169.254.169.254/latest"}, "webhook_url"),
])
async def test_bad_rule_is_400_naming_the_field(api, change, field):
    response, body = await api.post("/v1/alerts", json={k: v for k, v in {**RULE, **change}.items() if v is not None})
    assert response.status == 400, body
    assert body["details"]["errors"][0]["loc"] == field


async def test_the_51st_rule_of_a_tenant_is_409_with_the_limit(api):
    for n in range(50):
        response, body = await api.post("/v1/alerts", json={**RULE, "name": f"r{n}"})
        assert response.status == 201, body
    response, body = await api.post("/v1/alerts", json={**RULE, "name": "one too many"})
    assert response.status == 409 and body["details"]["limit"] == 50


async def test_list_filters_by_eval_id(api):
    await api.post("/v1/alerts", json={**RULE, "name": "global"})
    await api.post("/v1/alerts", json={**RULE, "name": "scoped", "eval_id": "demo"})
    response, page = await api.get("/v1/alerts", params={"eval_id": "demo"})
    assert response.status == 200 and [r["name"] for r in page["items"]] == ["scoped"]


async def test_deleted_rule_is_gone(api):
    _, rule = await api.post("/v1/alerts", json=RULE)
    response, _ = await api.delete(f"/v1/alerts/{rule['id']}")
    assert response.status == 204
    response, body = await api.get(f"/v1/alerts/{rule['id']}")
    assert response.status == 404


async def test_another_tenants_rule_is_403_and_not_listed(api, other_tenant_key):
    _, rule = await api.post("/v1/alerts", json=RULE)
    response, _ = await api.get(f"/v1/alerts/{rule['id']}", key=other_tenant_key)
    assert response.status == 403
    _, page = await api.get("/v1/alerts", key=other_tenant_key)
    assert page["items"] == []


SPEC_ALERTS = """alerts:
  - name: slow
    condition: p95_wall_ms > 1000
    notify: webhook
    webhook_url: http://127.0.0.1:9/a
  - name: costly
    condition: total_cost_usd >= 2
    window: last_24h
    notify: chat
    slack_channel: "#evals"
"""


async def test_spec_alerts_become_rules_scoped_to_the_spec(api):
    await api.upload_yaml(spec_yaml(extra=SPEC_ALERTS))
    _, page = await api.get("/v1/alerts", params={"eval_id": "demo"})
    assert sorted((r["name"], r["source"], r["eval_id"]) for r in page["items"]) == [("costly", "spec", "demo"), ("slow", "spec", "demo")]


async def test_spec_reupload_replaces_its_rules_and_keeps_api_rules(api):
    await api.upload_yaml(spec_yaml(extra=SPEC_ALERTS))
    await api.post("/v1/alerts", json={**RULE, "eval_id": "demo"})
    await api.upload_yaml(spec_yaml(extra=SPEC_ALERTS.split("  - name: costly")[0]))
    _, page = await api.get("/v1/alerts", params={"eval_id": "demo"})
    assert sorted(r["name"] for r in page["items"]) == ["pass rate low", "slow"]


async def test_spec_email_alerts_go_to_the_daemons_address(api, monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_EMAIL_TO", "evals@example.com")
    await api.upload_yaml(spec_yaml(extra="alerts:\n  - name: mail\n    condition: pass_rate < 1\n    notify: email\n"))
    _, page = await api.get("/v1/alerts", params={"eval_id": "demo"})
    assert [r["email_to"] for r in page["items"]] == ["evals@example.com"]


async def test_spec_alerts_past_the_limit_are_409(api):
    for n in range(49):
        await api.post("/v1/alerts", json={**RULE, "name": f"r{n}"})
    response, body = await api.post("/v1/specs", json={"name": "x", "yaml": spec_yaml(extra=SPEC_ALERTS)})
    assert (response.status, body["details"]["limit"]) == (409, 50)


async def test_spec_reupload_keeps_a_named_rules_id_with_its_new_condition(api):
    await api.upload_yaml(spec_yaml(extra=SPEC_ALERTS))
    _, before = await api.get("/v1/alerts", params={"eval_id": "demo"})
    await api.upload_yaml(spec_yaml(extra=SPEC_ALERTS.replace("p95_wall_ms > 1000", "p95_wall_ms > 2000")))
    _, after = await api.get("/v1/alerts", params={"eval_id": "demo"})
    [old_id] = [r["id"] for r in before["items"] if r["name"] == "slow"]
    assert [(r["id"], r["threshold"]) for r in after["items"] if r["name"] == "slow"] == [(old_id, 2000.0)]
