"""The typed client (client/typed.py) for judges, score rules, scores and behaviors answers with the
contract's models, against the in-process daemon over real HTTP; the model is a real OpenAI server."""
from __future__ import annotations

import json

import pytest

from client.api import Client
from client.config import ClientConfig
from client.typed import TypedApi
from tests.support.experiments import start
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.scores import add_llm_spans, finished_experiment


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        server.respond = lambda body: Reply(content=json.dumps(
            {"score": 1 if "42" in body["messages"][-1]["content"] else 0, "reason": "graded"}))
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "sk-test-judge")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0")
        yield server


@pytest.fixture
async def flow(aiohttp_client, tmp_path, runner, llm):
    """A judge, a rule using it, a behavior bound to it, an experiment scored through the typed client."""
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], ["42", "nothing", "42 again"])
    client = Client(ClientConfig(base_url=api.base_url(), api_key=api.key, timeout=30, home=tmp_path, api_key_source="test"))
    typed = TypedApi(client)
    judge = await typed.create_judge({"name": "number", "rubric": "Is the number given?"})
    rule = await typed.create_score_rule({"name": "number", "type": "llm_judge", "judge_id": judge.id,
                                          "applies_to": {"event_type": "llm_call"}})
    behavior = await typed.create_behavior({"name": "number", "kind": "binary", "judge_id": judge.id, "baseline_pct": 0.5,
                                            "baseline_direction": "above"})
    accepted = await typed.score_experiment(results["id"], [rule.id])
    events = [event async for event in typed.score_job_events(accepted.job_id)]
    yield {"typed": typed, "experiment_id": results["id"], "judge": judge, "rule": rule, "behavior": behavior, "events": events}
    await client.close()


async def test_the_job_stream_ends_with_the_completed_job(flow):
    assert (flow["events"][-1].type, flow["events"][-1].job.status, flow["events"][-1].job.done) == ("done", "completed", 3)


async def test_experiment_scores_are_the_contract_aggregates(flow):
    scores = await flow["typed"].experiment_scores(flow["experiment_id"])
    assert (scores.scored, scores.unscored, scores.judge_error_rate, [r.passed for r in scores.rules]) == (3, 0, 0.0, [2])


async def test_score_rows_page_by_rule(flow):
    page = await flow["typed"].list_scores(flow["experiment_id"], rule_id=flow["rule"].id, limit=2)
    assert (len(page.items), page.next_cursor is not None, page.items[0].rule_id) == (2, True, flow["rule"].id)


async def test_the_bound_behaviors_stats_count_the_scored_spans(flow):
    stats = await flow["typed"].behavior_stats(flow["behavior"].id)
    assert (stats.sample, stats.rate, stats.breached) == (3, 0.666667, False)  # under 20: never breached


async def test_judge_eval_and_calibration_are_models(flow):
    typed, judge = flow["typed"], flow["judge"]
    verdict = await typed.judge_eval(judge.id, {"input": "q", "output": "42"}, cache=False)
    calibration = await typed.calibrate_judge(judge.id, [{"input": "q", "output": "42", "label": True},
                                                         {"input": "q", "output": "no", "label": False}])
    stored = await typed.judge(judge.id)
    assert (verdict.score, calibration.agreement, stored.calibration.n) == (1.0, 1.0, 2)


async def test_deleted_resources_are_gone_from_their_lists(flow):
    typed = flow["typed"]
    await typed.delete_behavior(flow["behavior"].id)
    await typed.delete_score_rule(flow["rule"].id)
    await typed.delete_judge(flow["judge"].id)
    lists = [await typed.list_behaviors(), await typed.list_score_rules(), await typed.list_judges()]
    assert [page.items for page in lists] == [[], [], []]
