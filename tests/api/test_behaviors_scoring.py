"""Behaviors fed by scoring: a behavior bound to a judge or a score rule receives a verdict for every
span the rule scores (offline jobs and scoring on completion), judge errors are stored but never
counted, and a span re-scored is not counted twice. The model is a real OpenAI-compatible server."""
from __future__ import annotations

import json

import pytest

from tests.support.experiments import start
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.scores import add_llm_spans, create_rule, finished_experiment, score, wait_job
from daemon.appkeys import STORE

# "42" is detected (score 1), anything else is not (0.1), "no idea" makes the judge fail (500).
OUTPUTS = ["the answer is 42", "42 again", "42!", "I do not know", "no idea"]


def grade(body: dict) -> Reply:
    prompt = body["messages"][-1]["content"]
    if "no idea" in prompt:
        return Reply(status=500)
    if body["response_format"]["json_schema"]["schema"]["properties"].get("label"):
        return Reply(content=json.dumps({"label": "leak" if "42" in prompt else "clean", "reason": "labelled"}))
    return Reply(content=json.dumps({"score": 1 if "42" in prompt else 0.1, "reason": "graded"}))


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        server.respond = grade
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "sk-test-judge")
        monkeypatch.setenv("SERVICE_JUDGE_MODEL", "judge-model")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0")
        yield server


async def create(api, path: str, **fields) -> dict:
    response, body = await api.post(path, json=fields)
    assert response.status == 201, body
    return body


async def stats(api, behavior: dict) -> dict:
    response, body = await api.get(f"/v1/behaviors/{behavior['id']}/stats")
    assert response.status == 200, body
    return body


@pytest.fixture
async def judged(aiohttp_client, tmp_path, runner, llm):
    """An experiment with five llm spans, a judge, an llm_judge rule using it, a behavior bound to the judge."""
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], OUTPUTS)
    judge = await create(api, "/v1/judges", name="says 42", rubric="Does the output give the number?")
    rule = await create_rule(api, name="says 42", type="llm_judge", judge_id=judge["id"], applies_to={"event_type": "llm_call"})
    behavior = await create(api, "/v1/behaviors", name="says 42", kind="binary", judge_id=judge["id"], baseline_pct=0.5,
                            baseline_direction="above")
    return api, results["id"], rule, behavior


async def test_a_behavior_bound_to_a_judge_gets_a_verdict_per_judged_span_without_the_judge_errors(judged):
    api, experiment_id, rule, behavior = judged
    await score(api, experiment_id, [rule["id"]])
    assert await stats(api, behavior) == {"rate": 0.75, "sample": 4, "breached": False, "baseline_pct": 0.5,
                                          "baseline_direction": "above"}


async def test_the_judge_error_is_stored_as_an_uncounted_verdict(judged):
    api, experiment_id, rule, behavior = judged
    await score(api, experiment_id, [rule["id"]])
    rows = await api.app[STORE].fetchall("SELECT detected, judge_error FROM behavior_verdicts WHERE behavior_id = ? AND"
                                         " span_id = 'span_llm_4'", (behavior["id"],))
    assert [(r["detected"], r["judge_error"].split(":")[0]) for r in rows] == [(None, "server_error")]


async def test_rescoring_the_same_spans_does_not_count_them_twice(judged):
    api, experiment_id, rule, behavior = judged
    await score(api, experiment_id, [rule["id"]])
    await score(api, experiment_id, [rule["id"]])
    assert (await stats(api, behavior))["sample"] == 4


async def test_a_behavior_of_another_rule_gets_no_verdicts(judged):
    api, experiment_id, rule, behavior = judged
    other = await create_rule(api, name="other", type="regex", pattern="42")
    await score(api, experiment_id, [other["id"]])
    assert (await stats(api, behavior))["sample"] == 0


async def test_a_classifier_behavior_detects_the_label_its_judge_scores_as_passing(aiohttp_client, tmp_path, runner, llm):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], OUTPUTS)
    judge = await create(api, "/v1/judges", name="leaks", rubric="Does it leak the number?", kind="classifier",
                         choices={"leak": 1, "clean": 0})
    rule = await create_rule(api, name="leaks", type="llm_judge", judge_id=judge["id"], applies_to={"event_type": "llm_call"})
    behavior = await create(api, "/v1/behaviors", name="leaks", kind="classifier", judge_id=judge["id"], labels=["leak", "clean"],
                            baseline_pct=0.5, baseline_direction="above")
    await score(api, results["id"], [rule["id"]])
    rows = await api.app[STORE].fetchall("SELECT detected, label FROM behavior_verdicts WHERE behavior_id = ? AND detected IS NOT NULL"
                                         " ORDER BY span_id", (behavior["id"],))
    assert [(r["detected"], r["label"]) for r in rows] == [(1, "leak"), (1, "leak"), (1, "leak"), (0, "clean")]


async def test_a_behavior_bound_to_a_rule_breaches_from_an_offline_job_and_queues_one_notice(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], ["leaked the key"] * 10 + ["fine"] * 15)
    rule = await create_rule(api, name="leaks", type="regex", pattern="leak", applies_to={"event_type": "llm_call"})
    behavior = await create(api, "/v1/behaviors", name="leaks", kind="binary", rule_id=rule["id"], baseline_pct=0.2,
                            baseline_direction="above", notify="webhook", webhook_url="http://127.0.0.1:9/hook")
    await score(api, results["id"], [rule["id"]])
    _, deliveries = await api.get(f"/v1/behaviors/{behavior['id']}/deliveries")
    assert ((await stats(api, behavior))["breached"], [d["event"] for d in deliveries["items"]]) == (True, ["behavior.breached"])


SPEC_RULE = """score_rules:
  - name: reads files
    type: regex
    pattern: "never-in-a-fake-span"
    applies_to:
      tool: read_file
"""


async def test_a_behavior_bound_to_a_spec_rule_gets_verdicts_when_the_experiment_completes(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    await api.upload_yaml(_spec_with_rule())
    _, rules = await api.get("/v1/score-rules?eval_id=demo")
    behavior = await create(api, "/v1/behaviors", name="reads", kind="binary", rule_id=rules["items"][0]["id"], baseline_pct=0.5,
                            baseline_direction="below")
    results = await finished_experiment(api, replicas=20, extra=SPEC_RULE)
    row = await api.app[STORE].fetchone("SELECT id FROM score_jobs WHERE experiment_id = ?", (results["id"],))
    await wait_job(api, row["id"])
    assert await stats(api, behavior) == {"rate": 0.0, "sample": 20, "breached": True, "baseline_pct": 0.5,
                                          "baseline_direction": "below"}


def _spec_with_rule() -> str:
    from tests.support.specs import spec_yaml

    return spec_yaml("demo", matrix=[{"mode": "pass"}], replicas=20, extra=SPEC_RULE)
