"""llm_judge rules against a real local OpenAI-compatible server: graded spans, and a judge failure that
is a row with score null and its judge_error, counted in `unscored`, never a score."""
from __future__ import annotations

import pytest

from tests.support.experiments import start, wait_done
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.scores import add_llm_spans, create_rule, finished_experiment, score
from daemon.appkeys import DEFAULT_TENANT_ID, STORE

OUTPUTS = ["the answer is 42", "I do not know", "42, surely", "no idea"]


def grade(body: dict) -> Reply:
    prompt = body["messages"][-1]["content"]
    if "no idea" in prompt:
        return Reply(status=500)
    if "42" in prompt:
        return Reply(content='{"score": 1, "reason": "correct"}')
    return Reply(content='{"score": 0.2, "reason": "does not answer"}')


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        server.respond = grade
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "sk-test-judge")
        monkeypatch.setenv("SERVICE_JUDGE_MODEL", "judge-model")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0")
        yield server


@pytest.fixture
async def judged(aiohttp_client, tmp_path, runner, llm):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], OUTPUTS)
    rule = await create_rule(api, name="answers", type="llm_judge", rubric="Does it answer the question?",
                             applies_to={"event_type": "llm_call"})
    job = await score(api, results["id"], [rule["id"]])
    assert job["status"] == "completed", job
    return api, results["id"], rule


async def test_judge_rule_aggregates_count_the_failure_as_unscored(judged):
    api, experiment_id, rule = judged
    response, body = await api.get(f"/v1/experiments/{experiment_id}/scores")
    agg = body["rules"][0]
    assert (agg["n"], agg["scored"], agg["unscored"], agg["passed"], agg["judge_error_rate"]) == (4, 3, 1, 2, 0.25)


async def test_a_judge_failure_is_a_null_score_with_its_error(judged):
    api, experiment_id, rule = judged
    response, body = await api.get(f"/v1/scores?experiment_id={experiment_id}")
    failed = next(s for s in body["items"] if s["span_id"] == "span_llm_3")
    assert (failed["score"], failed["passed"], failed["judge_error"]["code"]) == (None, None, "server_error")


async def test_graded_spans_carry_the_judges_score_and_reason(judged):
    api, experiment_id, rule = judged
    response, body = await api.get(f"/v1/scores?experiment_id={experiment_id}")
    graded = {s["span_id"]: (s["score"], s["passed"], s["reason"]) for s in body["items"] if s["judge_error"] is None}
    assert graded == {"span_llm_0": (1.0, True, "correct"), "span_llm_1": (0.2, False, "does not answer"),
                      "span_llm_2": (1.0, True, "correct")}


async def test_a_stored_judge_scores_through_the_rule(aiohttp_client, tmp_path, runner, llm):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], ["42", "nothing"])
    from daemon.store import judges as judge_store

    await judge_store.create(api.app[STORE], api.app[DEFAULT_TENANT_ID], "jdg_strict", name="strict", rubric="Is it the right number?",
                             model=None, threshold=0.9, kind="score", choices=None)
    rule = await create_rule(api, name="strict", type="llm_judge", judge_id="jdg_strict", applies_to={"event_type": "llm_call"})
    await score(api, results["id"], [rule["id"]])
    response, body = await api.get(f"/v1/experiments/{results['id']}/scores")
    assert (body["rules"][0]["passed"], body["rules"][0]["mean_score"]) == (1, 0.6)


async def test_compare_warns_naming_the_side_whose_judge_error_rate_is_above_5_percent(judged):
    api, experiment_id, rule = judged
    response, baseline = await api.post("/v1/experiments", json={"name": "baseline", "spec_id": "demo"})
    await api.post(f"/v1/experiments/{baseline['id']}/run")
    await wait_done(api, baseline["id"])
    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": baseline["id"], "candidate_id": experiment_id})
    assert response.status == 200, result
    assert [w.split(":")[0] for w in result["judge_warnings"]] == [f"candidate {experiment_id}"]
