"""The real `svc` CLI: score-rules list|create|delete, eval score, logs scores."""
from __future__ import annotations

import json

from tests.support.experiments import start
from tests.support.procs import svc_cli
from tests.support.scores import add_llm_spans, finished_experiment


async def scored_setup(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], ["the answer is 42", "no idea", "42!"])
    code, out, err = await svc_cli(api, "score-rules", "create", "says 42", "--type", "regex", "--pattern", "42",
                                   "--event-type", "llm_call")
    assert code == 0, err
    return api, results["id"], json.loads(out)


async def test_eval_score_prints_the_rules_aggregates(aiohttp_client, tmp_path, runner):
    api, experiment_id, rule = await scored_setup(aiohttp_client, tmp_path, runner)
    code, out, err = await svc_cli(api, "eval", "score", experiment_id, "--rule", rule["id"])
    body = json.loads(out)
    assert (code, body["job"]["status"], [(r["n"], r["passed"]) for r in body["rules"]]) == (0, "completed", [(3, 2)])


async def test_logs_scores_prints_one_line_per_span_of_the_rule(aiohttp_client, tmp_path, runner):
    api, experiment_id, rule = await scored_setup(aiohttp_client, tmp_path, runner)
    await svc_cli(api, "eval", "score", experiment_id)
    code, out, err = await svc_cli(api, "logs", "scores", "--experiment", experiment_id, "--rule", rule["id"])
    rows = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["span_id"], r["passed"]) for r in rows) == [("span_llm_0", True), ("span_llm_1", False), ("span_llm_2", True)]


async def test_score_rules_list_and_delete(aiohttp_client, tmp_path, runner):
    api, experiment_id, rule = await scored_setup(aiohttp_client, tmp_path, runner)
    code, out, err = await svc_cli(api, "score-rules", "delete", rule["id"])
    assert code == 0, err
    code, out, err = await svc_cli(api, "score-rules", "list")
    assert json.loads(out) == []


async def test_a_bad_pattern_is_one_line_naming_the_field_and_exit_1(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    code, out, err = await svc_cli(api, "score-rules", "create", "bad", "--type", "regex", "--pattern", "(")
    assert code == 1 and "pattern" in err.splitlines()[0]
