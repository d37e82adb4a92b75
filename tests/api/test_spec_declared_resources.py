"""A spec whose declared score rules or alerts are refused is refused whole: no new version is
stored and the rules it had stay as they were."""
from __future__ import annotations

from tests.support.specs import spec_yaml

GOOD_RULES = "score_rules:\n  - name: refunds\n    type: regex\n    pattern: 'refund'\n"
BAD_RULES = "score_rules:\n  - name: refunds\n    type: regex\n    pattern: 'refund'\n  - name: broken\n    type: regex\n    pattern: '(unclosed'\n"
ALERT = "alerts:\n  - name: low\n    condition: pass_rate < 0.8\n    notify: webhook\n    webhook_url: http://127.0.0.1:9/hook\n"


async def _versions(api) -> int:
    response, page = await api.get("/v1/specs/demo/versions")
    return len(page["items"]) if response.status == 200 else 0


async def test_an_invalid_declared_score_rule_refuses_the_upload_naming_it(api):
    await api.upload_yaml(spec_yaml(extra=GOOD_RULES))
    response, body = await api.post("/v1/specs", json={"name": "demo", "yaml": spec_yaml(extra=BAD_RULES)})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "score_rules.1.pattern")
    assert await _versions(api) == 1
    _, rules = await api.get("/v1/score-rules", params={"eval_id": "demo"})
    assert [r["name"] for r in rules["items"]] == ["refunds"]


async def test_declared_alerts_past_the_limit_refuse_the_upload_and_store_nothing(api):
    for n in range(50):
        response, _ = await api.post("/v1/alerts", json={"name": f"r{n}", "condition": "pass_rate < 0.5", "notify": "webhook",
                                                        "webhook_url": "http://127.0.0.1:9/hook"})
        assert response.status == 201
    response, body = await api.post("/v1/specs", json={"name": "demo", "yaml": spec_yaml(extra=ALERT + GOOD_RULES)})
    assert (response.status, body["details"]["limit"]) == (409, 50)
    assert await _versions(api) == 0
    _, rules = await api.get("/v1/score-rules", params={"eval_id": "demo"})
    assert rules["items"] == []
