"""The export carries the score summary GET /v1/experiments/{id}/scores reports: scored, unscored,
judge_error_rate and the per-rule aggregates, in the JSON bundle and as the NDJSON score_summary record."""
from __future__ import annotations

import json

from tests.support.experiments import start
from tests.support.scores import add_llm_spans, create_rule, finished_experiment, score


async def scored(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    await add_llm_spans(api, results["id"], ["42", "nothing", "42!"])
    rule = await create_rule(api, name="says 42", type="regex", pattern="42", applies_to={"event_type": "llm_call"})
    await score(api, results["id"], [rule["id"]])
    _, scores = await api.get(f"/v1/experiments/{results['id']}/scores")
    return api, results["id"], {k: scores[k] for k in ("scored", "unscored", "judge_error_rate", "rules")}


async def test_the_json_export_carries_the_score_summary(aiohttp_client, tmp_path, runner):
    api, experiment_id, summary = await scored(aiohttp_client, tmp_path, runner)
    _, bundle = await api.get(f"/v1/experiments/{experiment_id}/export")
    assert bundle["score_summary"] == summary and summary["scored"] == 3


async def test_the_ndjson_export_ends_with_the_score_summary(aiohttp_client, tmp_path, runner):
    api, experiment_id, summary = await scored(aiohttp_client, tmp_path, runner)
    response = await api.client.get(f"/v1/experiments/{experiment_id}/export?format=ndjson", headers=api.headers())
    records = [json.loads(line) for line in (await response.text()).splitlines()]
    last = records[-1]
    assert (last.pop("type"), last) == ("score_summary", summary)
