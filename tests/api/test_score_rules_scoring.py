"""Offline scoring of a real experiment's spans with regex rules: exact counts, appended rows, latest reads,
aggregates, the job's stream, automatic scoring on completion."""
from __future__ import annotations

import pytest

from tests.support.experiments import start
from tests.support.scores import add_llm_spans, create_rule, finished_experiment, score, wait_job
from tests.support.sse import sse_data
from daemon.appkeys import STORE

OUTPUTS = ["the answer is 42", "I do not know", "42, surely", "no idea"]


@pytest.fixture
async def scored(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=3)
    await add_llm_spans(api, results["id"], OUTPUTS)
    return api, results["id"]


async def test_a_regex_rule_scores_exactly_the_spans_it_applies_to(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="says 42", type="regex", pattern=r"\b42\b", applies_to={"event_type": "llm_call"})
    job = await score(api, experiment_id, [rule["id"]])
    response, body = await api.get(f"/v1/experiments/{experiment_id}/scores")
    assert (job["status"], job["total"], job["done"]) == ("completed", 4, 4)
    assert [(r["n"], r["passed"], r["pass_rate"], r["scored"], r["unscored"]) for r in body["rules"]] == [(4, 2, 0.5, 4, 0)]


async def test_a_tool_filter_scores_only_that_tools_spans(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="anything", type="regex", pattern=".", applies_to={"tool": "write_file"})
    await score(api, experiment_id, [rule["id"]])
    response, body = await api.get(f"/v1/scores?experiment_id={experiment_id}")
    assert sorted(s["span_id"].rsplit("_", 1)[1] for s in body["items"]) == ["1", "1", "1"]  # span_<run>_1: write_file, 3 runs


async def test_rows_carry_the_span_trace_and_scenario(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="says 42", type="regex", pattern="42", applies_to={"event_type": "llm_call"})
    await score(api, experiment_id, [rule["id"]])
    response, body = await api.get(f"/v1/scores?experiment_id={experiment_id}&rule_id={rule['id']}")
    row = next(s for s in body["items"] if s["span_id"] == "span_llm_0")
    assert (row["score"], row["passed"], row["judge_error"], row["trace_id"].startswith("trace-")) == (1.0, True, None, True)


async def test_runs_spans_carry_their_scenario(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="reads", type="regex", pattern="x", applies_to={"tool": "read_file"})
    await score(api, experiment_id, [rule["id"]])
    response, results = await api.get(f"/v1/experiments/{experiment_id}")
    response, body = await api.get(f"/v1/scores?experiment_id={experiment_id}")
    assert {s["scenario_id"] for s in body["items"]} == {results["scenarios"][0]["id"]}


async def test_a_rescore_appends_rows_and_reads_show_the_latest(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="says 42", type="regex", pattern="42", applies_to={"event_type": "llm_call"})
    await score(api, experiment_id, [rule["id"]])
    await score(api, experiment_id, [rule["id"]])
    response, latest = await api.get(f"/v1/scores?experiment_id={experiment_id}")
    response, every = await api.get(f"/v1/scores?experiment_id={experiment_id}&all=true")
    assert (latest["count"], every["count"]) == (4, 8)


async def test_without_rule_ids_every_applicable_rule_scores(scored):
    api, experiment_id = scored
    await create_rule(api, name="says 42", type="regex", pattern="42", applies_to={"event_type": "llm_call"})
    await create_rule(api, name="other spec", type="regex", pattern="42", eval_id="not-this-one")
    job = await score(api, experiment_id)
    assert job["total"] == 4


async def test_an_unknown_rule_id_is_refused_naming_it(scored):
    api, experiment_id = scored
    response, body = await api.post(f"/v1/experiments/{experiment_id}/score", json={"rule_ids": ["sr_nope"]})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "rule_ids.0"


async def test_another_tenant_cannot_score_or_read(scored, other_tenant_key):
    api, experiment_id = scored
    response, _ = await api.get(f"/v1/scores?experiment_id={experiment_id}", key=other_tenant_key)
    assert response.status == 403


async def test_the_job_stream_ends_with_done(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="says 42", type="regex", pattern="42")
    job = await score(api, experiment_id, [rule["id"]])
    response = await api.client.get(f"/v1/score-jobs/{job['id']}/stream", headers=api.headers())
    events = sse_data(await response.text())
    assert events[-1]["type"] == "done" and events[-1]["job"]["done"] == 10  # 6 tool spans + 4 llm spans


SPEC_RULE = """score_rules:
  - name: reads files
    type: regex
    pattern: "."
    applies_to:
      tool: read_file
"""


async def test_rules_of_the_spec_score_its_experiment_when_it_completes(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=2, extra=SPEC_RULE)
    store = api.app[STORE]
    row = await store.fetchone("SELECT id FROM score_jobs WHERE experiment_id = ?", (results["id"],))
    job = await wait_job(api, row["id"])
    assert (job["trigger"], job["total"]) == ("completion", 2)


async def test_the_export_carries_every_score_row_in_the_api_shape(scored):
    api, experiment_id = scored
    rule = await create_rule(api, name="says 42", type="regex", pattern="42", applies_to={"event_type": "llm_call"})
    await score(api, experiment_id, [rule["id"]])
    await score(api, experiment_id, [rule["id"]])
    response, bundle = await api.get(f"/v1/experiments/{experiment_id}/export")
    response, listing = await api.get(f"/v1/scores?experiment_id={experiment_id}&all=true")
    assert sorted(bundle["scores"], key=lambda s: s["id"]) == sorted(listing["items"], key=lambda s: s["id"])
