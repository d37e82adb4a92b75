"""/v1/judges through the in-process daemon, the model played by a real OpenAI chat-completions server:
definitions, verdicts around the threshold, classifier labels, judge errors as 200 with no score, the
cache, calibration numbers, tenant isolation."""
from __future__ import annotations

import json

import pytest

from tests.support.openai_server import OpenAIServer, Reply

RUBRIC = "Does the output answer the input correctly?"


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "sk-api-test-1")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0.01")
        yield server


def score_reply(score: float) -> Reply:
    return Reply(content=json.dumps({"score": score, "reason": f"graded {score}"}))


async def create(api, expect: int = 201, **fields) -> dict:
    response, body = await api.post("/v1/judges", json={"name": "correctness", "rubric": RUBRIC, **fields})
    assert response.status == expect, body
    return body


async def judge_eval(api, judge_id: str, query: str = "", **body) -> tuple[int, dict]:
    response, answer = await api.post(f"/v1/judges/{judge_id}/eval{query}", json={"input": "2+2?", "output": "4", **body})
    return response.status, answer


async def test_a_created_judge_is_listed_and_read_back(api):
    judge = await create(api, threshold=0.7)
    _, listing = await api.get("/v1/judges")
    _, got = await api.get(f"/v1/judges/{judge['id']}")
    assert ([j["id"] for j in listing["items"]], got) == ([judge["id"]], judge)


async def test_a_deleted_judge_is_gone(api):
    judge = await create(api)
    response, _ = await api.delete(f"/v1/judges/{judge['id']}")
    gone, _ = await api.get(f"/v1/judges/{judge['id']}")
    assert (response.status, gone.status) == (204, 404)


async def test_a_classifier_without_choices_is_refused_naming_choices(api):
    body = await create(api, expect=400, kind="classifier")
    assert "choices" in body["message"]


async def test_a_score_judge_with_choices_is_refused(api):
    body = await create(api, expect=400, choices={"a": 1, "b": 0})
    assert "choices" in body["message"]


async def test_a_threshold_above_one_is_refused_naming_threshold(api):
    body = await create(api, expect=400, threshold=1.5)
    assert body["details"]["errors"][0]["loc"] == "threshold"


async def test_the_tenant_judge_limit_is_a_409_naming_it(api, monkeypatch):
    import daemon.api.judges

    monkeypatch.setattr(daemon.api.judges, "MAX_JUDGES_PER_TENANT", 1)
    await create(api)
    body = await create(api, expect=409)
    assert body["details"]["limit"] == 1


@pytest.mark.parametrize("score, passed", [(0.71, True), (0.69, False)])
async def test_eval_passes_at_or_above_the_threshold(api, llm, score, passed):
    judge = await create(api, threshold=0.7)
    llm.respond = lambda body: score_reply(score)
    status, verdict = await judge_eval(api, judge["id"])
    assert (status, verdict) == (200, {"score": score, "passed": passed, "reason": f"graded {score}", "label": None, "judge_error": None})


async def test_a_classifier_eval_answers_the_label_and_its_score(api, llm):
    judge = await create(api, kind="classifier", choices={"wrong": 0, "partly": 0.5, "right": 1})
    llm.respond = lambda body: Reply(content=json.dumps({"label": "partly", "reason": "half"}))
    _, verdict = await judge_eval(api, judge["id"])
    assert (verdict["label"], verdict["score"], verdict["passed"]) == ("partly", 0.5, True)


async def test_a_failed_judge_call_is_200_with_no_score(api, llm):
    judge = await create(api)
    llm.respond = lambda body: Reply(status=500)
    status, verdict = await judge_eval(api, judge["id"])
    assert (status, verdict["score"], verdict["passed"], verdict["judge_error"]["code"]) == (200, None, None, "server_error")


async def test_an_identical_eval_is_answered_from_the_cache(api, llm):
    judge = await create(api)
    llm.respond = lambda body: score_reply(0.9)
    await judge_eval(api, judge["id"])
    _, again = await judge_eval(api, judge["id"])
    assert (again["score"], len(llm.requests)) == (0.9, 1)


async def test_cache_false_asks_the_judge_again(api, llm):
    judge = await create(api)
    llm.respond = lambda body: score_reply(0.9)
    await judge_eval(api, judge["id"])
    await judge_eval(api, judge["id"], "?cache=false")
    assert len(llm.requests) == 2


async def test_an_oversized_output_is_refused_naming_the_field_and_limit(api):
    judge = await create(api)
    status, body = await judge_eval(api, judge["id"], output="x" * 100_001)
    assert (status, body["details"]["errors"][0]["loc"], "100000" in body["message"]) == (400, "output", True)


async def test_another_tenant_cannot_read_a_judge(api, other_tenant_key):
    judge = await create(api)
    response, _ = await api.get(f"/v1/judges/{judge['id']}", key=other_tenant_key)
    assert response.status == 403


async def test_another_tenant_cannot_eval_a_judge(api, llm, other_tenant_key):
    judge = await create(api)
    response, _ = await api.post(f"/v1/judges/{judge['id']}/eval", json={"input": "a", "output": "b"}, key=other_tenant_key)
    assert (response.status, len(llm.requests)) == (403, 0)


async def test_another_tenant_does_not_see_judges_in_its_list(api, other_tenant_key):
    await create(api)
    _, listing = await api.get("/v1/judges", key=other_tenant_key)
    assert listing["items"] == []


async def test_an_unknown_judge_is_404(api):
    response, _ = await api.post("/v1/judges/judge_nope/eval", json={"input": "a", "output": "b"})
    assert response.status == 404


# Calibration: the judge scores "good..." outputs 0.9 and "bad..." outputs 0.1 (threshold 0.5) and
# fails on "broken"; the labels give tp 4, fp 1, tn 3, fn 2 over 10 scored examples and 1 unscored.
EXAMPLES = (
    [{"output": f"good-{i}", "label": True} for i in range(4)]      # tp
    + [{"output": "good-fp", "label": False}]                       # fp
    + [{"output": f"bad-{i}", "label": False} for i in range(3)]    # tn
    + [{"output": f"bad-fn-{i}", "label": True} for i in range(2)]  # fn
    + [{"output": "broken", "label": True}]                         # unscored
)


def calibration_judge(body: dict) -> Reply:
    prompt = body["messages"][-1]["content"]
    if "broken" in prompt:
        return Reply(status=500)
    return score_reply(0.9 if "Output to judge:\ngood" in prompt else 0.1)


async def calibrate(api, llm) -> dict:
    judge = await create(api)
    llm.respond = calibration_judge
    response, result = await api.post(f"/v1/judges/{judge['id']}/calibrate",
                                      json={"examples": [{"input": "q", **e} for e in EXAMPLES]})
    assert response.status == 200, result
    return {"judge": judge, **result}


async def test_calibration_metrics_are_exact(api, llm):
    result = await calibrate(api, llm)
    # agreement (4+3)/10; chance ((5*6)+(5*4))/100 = 0.5; kappa (0.7-0.5)/0.5; f1 8/11; tpr 4/6; tnr 3/4
    got = {k: result[k] for k in ("n", "agreement", "cohen_kappa", "f1", "tpr", "tnr", "confusion", "unscored")}
    assert got == {"n": 10, "agreement": pytest.approx(0.7), "cohen_kappa": pytest.approx(0.4), "f1": pytest.approx(8 / 11),
                   "tpr": pytest.approx(4 / 6), "tnr": pytest.approx(0.75), "confusion": {"tp": 4, "fp": 1, "tn": 3, "fn": 2},
                   "unscored": 1}


async def test_calibration_warns_about_few_examples_and_low_kappa(api, llm):
    result = await calibrate(api, llm)
    assert [w.split(" ")[0:2] for w in result["warnings"][:2]] == [["only", "10"], ["cohen_kappa", "0.400"]]


async def test_the_last_calibration_is_returned_with_the_judge(api, llm):
    result = await calibrate(api, llm)
    _, judge = await api.get(f"/v1/judges/{result['judge']['id']}")
    assert judge["calibration"]["confusion"] == {"tp": 4, "fp": 1, "tn": 3, "fn": 2}


async def test_a_calibration_label_must_be_a_boolean(api):
    judge = await create(api)
    response, body = await api.post(f"/v1/judges/{judge['id']}/calibrate",
                                    json={"examples": [{"input": "q", "output": "a", "label": "yes"}]})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "examples.0.label")


async def test_more_than_1000_calibration_examples_are_refused(api):
    judge = await create(api)
    response, body = await api.post(f"/v1/judges/{judge['id']}/calibrate",
                                    json={"examples": [{"input": "q", "output": "a", "label": True}] * 1001})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "examples")
