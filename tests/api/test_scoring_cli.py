"""The real `svc` CLI (a subprocess) for scoring in production: `judges get` shows the stored
calibration with its warnings, `eval compare` warns when a side's judge error rate is above 5%, a
behavior created with `--rule` is fed by `eval score`, and `behaviors get|list|delete`."""
from __future__ import annotations

import json

import pytest

from tests.support.experiments import start, wait_done
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.procs import svc_cli
from tests.support.scores import add_llm_spans, finished_experiment


def grade(body: dict) -> Reply:
    judged = body["messages"][-1]["content"].split("Output to judge:")[-1]
    if "no idea" in judged:
        return Reply(status=500)
    return Reply(content=json.dumps({"score": 1 if "42" in judged else 0, "reason": "graded"}))


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        server.respond = grade
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "sk-test-judge")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0")
        yield server


async def svc_json(api, *args: str) -> tuple[int, object, str]:
    code, out, err = await svc_cli(api, *args)
    return code, json.loads(out) if out.strip() else None, err


@pytest.fixture
async def daemon(aiohttp_client, tmp_path, runner, llm):
    return await start(aiohttp_client, tmp_path / "home", runner)


async def new_judge(api) -> dict:
    code, judge, err = await svc_json(api, "judges", "create", "--name", "number", "--rubric", "Is the number given?")
    assert code == 0, err
    return judge


async def test_judges_get_shows_the_stored_calibration_and_its_warnings(daemon, tmp_path):
    judge = await new_judge(daemon)
    examples = tmp_path / "labelled.jsonl"
    examples.write_text("".join(json.dumps({"input": "q", "output": out, "label": label}) + "\n"
                                for out, label in [("42", True), ("nothing", False), ("42!", False)]))
    code, _, err = await svc_json(daemon, "judges", "calibrate", judge["id"], str(examples))
    assert code == 0, err
    code, got, err = await svc_json(daemon, "judges", "get", judge["id"])
    assert (got["calibration"]["n"], got["calibration"]["confusion"], err.count("calibration warning")) == (
        3, {"tp": 1, "fp": 1, "tn": 1, "fn": 0}, 2)  # n < 50 and kappa < 0.6


async def test_eval_compare_warns_about_the_side_above_5_percent_judge_errors(daemon):
    results = await finished_experiment(daemon, replicas=1)
    await add_llm_spans(daemon, results["id"], ["42", "no idea"])
    code, _, err = await svc_json(daemon, "score-rules", "create", "number", "--type", "llm_judge", "--rubric", "Is it 42?",
                                  "--event-type", "llm_call")
    assert code == 0, err
    code, _, err = await svc_json(daemon, "eval", "score", results["id"])
    assert code == 0, err
    _, baseline = await daemon.post("/v1/experiments", json={"name": "baseline", "spec_id": "demo"})
    await daemon.post(f"/v1/experiments/{baseline['id']}/run")
    await wait_done(daemon, baseline["id"])
    code, result, err = await svc_json(daemon, "eval", "compare", baseline["id"], results["id"])
    warnings = [line for line in err.splitlines() if line.startswith("svc: warning:")]
    assert (code, len(warnings), f"candidate {results['id']}" in warnings[0]) == (0, 1, True)


async def test_a_behavior_created_with_rule_is_fed_by_eval_score(daemon):
    results = await finished_experiment(daemon, replicas=1)
    await add_llm_spans(daemon, results["id"], ["42", "nothing", "42 again", "no idea"])
    code, rule, err = await svc_json(daemon, "score-rules", "create", "number", "--type", "llm_judge", "--rubric", "Is it 42?",
                                     "--event-type", "llm_call")
    code, behavior, err = await svc_json(daemon, "behaviors", "create-binary", "says 42", "--baseline", "0.5", "--rule", rule["id"])
    assert code == 0, err
    await svc_json(daemon, "eval", "score", results["id"])
    code, stats, err = await svc_json(daemon, "behaviors", "stats", behavior["id"])
    assert (stats["sample"], stats["rate"]) == (3, 0.666667)  # the judge error is not counted


async def test_behaviors_get_list_and_delete(daemon):
    code, behavior, err = await svc_json(daemon, "behaviors", "create-binary", "leaks", "--baseline", "0.2")
    _, got, _ = await svc_json(daemon, "behaviors", "get", behavior["id"])
    _, listing, _ = await svc_json(daemon, "behaviors", "list")
    code, _, err = await svc_json(daemon, "behaviors", "delete", behavior["id"])
    gone, _, missing = await svc_json(daemon, "behaviors", "get", behavior["id"])
    assert ("secret" in got, [b["id"] for b in listing["items"]], code, gone) == (False, [behavior["id"]], 0, 1)
