"""Score rules: create, list, get, delete; validation naming the field; tenants; spec score_rules."""
from __future__ import annotations

from tests.support.scores import create_rule
from tests.support.specs import spec_yaml


async def test_a_created_rule_is_listed_read_and_deleted(api):
    rule = await create_rule(api, name="mentions refunds", type="regex", pattern=r"refund\w*", applies_to={"event_type": "llm_call"})
    response, listing = await api.get("/v1/score-rules")
    assert [r["id"] for r in listing["items"]] == [rule["id"]]
    response, again = await api.get(f"/v1/score-rules/{rule['id']}")
    assert again == rule and rule["applies_to"] == {"event_type": "llm_call", "tool": None} and rule["source"] == "api"
    response, _ = await api.delete(f"/v1/score-rules/{rule['id']}")
    assert response.status == 204
    response, _ = await api.get(f"/v1/score-rules/{rule['id']}")
    assert response.status == 404


async def test_list_filters_by_eval_id(api):
    await create_rule(api, name="a", type="regex", pattern="a", eval_id="demo")
    await create_rule(api, name="b", type="regex", pattern="b")
    response, listing = await api.get("/v1/score-rules?eval_id=demo")
    assert [r["name"] for r in listing["items"]] == ["a"]


async def test_a_bad_regex_is_refused_naming_pattern(api):
    body = await create_rule(api, expect=400, name="x", type="regex", pattern="(unclosed")
    assert body["details"]["errors"][0]["loc"] == "pattern"


async def test_a_regex_rule_without_pattern_is_refused_naming_pattern(api):
    body = await create_rule(api, expect=400, name="x", type="regex")
    assert body["details"]["errors"][0]["loc"] == "pattern"


async def test_a_judge_rule_without_rubric_is_refused_naming_rubric(api):
    body = await create_rule(api, expect=400, name="x", type="llm_judge")
    assert body["details"]["errors"][0]["loc"] == "rubric"


async def test_a_python_rule_without_command_is_refused_naming_command(api):
    body = await create_rule(api, expect=400, name="x", type="python", pattern="a")
    assert body["details"]["errors"][0]["loc"] == "pattern"  # a field python rules do not take comes first


async def test_an_unknown_judge_is_refused_naming_judge_id(api):
    body = await create_rule(api, expect=400, name="x", type="llm_judge", judge_id="jdg_nope")
    assert body["details"]["errors"][0]["loc"] == "judge_id"


async def test_another_tenants_rule_is_forbidden_and_not_listed(api, other_tenant_key):
    rule = await create_rule(api, name="mine", type="regex", pattern="x")
    response, _ = await api.get(f"/v1/score-rules/{rule['id']}", key=other_tenant_key)
    assert response.status == 403
    response, _ = await api.delete(f"/v1/score-rules/{rule['id']}", key=other_tenant_key)
    assert response.status == 403
    response, listing = await api.get("/v1/score-rules", key=other_tenant_key)
    assert listing["items"] == []


SPEC_RULES = """score_rules:
  - name: polite
    type: regex
    pattern: "please|thank"
  - name: no-secrets
    type: regex
    pattern: "sk-[a-z]+"
"""

SPEC_RULES_V2 = """score_rules:
  - name: polite
    type: regex
    pattern: "please"
    applies_to:
      event_type: llm_call
"""


async def test_spec_score_rules_are_created_scoped_to_the_spec(api):
    await api.upload_yaml(spec_yaml("demo", extra=SPEC_RULES))
    response, listing = await api.get("/v1/score-rules?eval_id=demo")
    assert sorted((r["name"], r["source"]) for r in listing["items"]) == [("no-secrets", "spec"), ("polite", "spec")]


async def test_a_spec_reupload_replaces_its_rules(api):
    await api.upload_yaml(spec_yaml("demo", extra=SPEC_RULES))
    response, first = await api.get("/v1/score-rules?eval_id=demo")
    await api.upload_yaml(spec_yaml("demo", extra=SPEC_RULES_V2))
    response, second = await api.get("/v1/score-rules?eval_id=demo")
    polite = next(r for r in first["items"] if r["name"] == "polite")
    assert [(r["id"], r["pattern"], r["applies_to"]["event_type"]) for r in second["items"]] == [(polite["id"], "please", "llm_call")]


async def test_a_spec_upload_leaves_api_rules_alone(api):
    api_rule = await create_rule(api, name="polite", type="regex", pattern="x", eval_id="demo")
    await api.upload_yaml(spec_yaml("demo", extra=SPEC_RULES_V2))
    response, listing = await api.get("/v1/score-rules?eval_id=demo")
    assert sorted(r["source"] for r in listing["items"]) == ["api", "spec"] and api_rule["id"] in {r["id"] for r in listing["items"]}


async def test_the_rule_limit_is_a_conflict_naming_it(api, monkeypatch):
    import daemon.api.scores

    monkeypatch.setattr(daemon.api.scores, "MAX_RULES_PER_TENANT", 1)
    await create_rule(api, name="one", type="regex", pattern="a")
    body = await create_rule(api, expect=409, name="two", type="regex", pattern="b")
    assert body["details"]["limit"] == 1 and "at most 1 score rules" in body["message"]
