"""A real run written as an ATIF trajectory: an agent with no svc code (the standard library's urllib)
talks to a fake OpenAI-compatible provider through its sandbox's model gateway, asks for a tool, runs
it and answers; `svc runs export RUN --atif` writes the trajectory, which validates with the `atif`
package's models (Harbor's RFC) and carries the run's steps, tool call and result, tokens, and svc's
verdict, invariant results, cost and effect ledger under `extra.svc`. The file reads back in with
`svc traces import --run`."""
from __future__ import annotations

import json
import os

import pytest
import pytest_asyncio
from atif import Trajectory

from tests.support.hosts import docker0_address
from tests.support.procs import svc_cli
from tests.support.provider_server import ProviderServer, ToolCall, Turn
from tests.support.runs import inv, run_spec, upload

pytestmark = pytest.mark.asyncio(loop_scope="module")

PYTHON = "localhost/svc/python:3.11"
OPENAI_KEY = "sk-atiftest-openai-0123456789abcdef"

AGENT = r'''
import json, os, urllib.request
base, key = os.environ["OPENAI_BASE_URL"].rstrip("/"), os.environ["OPENAI_API_KEY"]
tools = [{"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}]
def chat(messages):
    body = json.dumps({"model": "gpt-4o-mini", "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(base + "/chat/completions", data=body,
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(request, timeout=30))
messages = [{"role": "system", "content": "You write files."}, {"role": "user", "content": os.environ["SERVICE_TASK_PROMPT"]}]
asked = chat(messages)["choices"][0]["message"]
call = asked["tool_calls"][0]
text = json.loads(call["function"]["arguments"])["text"]
open("/workspace/out.txt", "w").write(text)
messages += [asked, {"role": "tool", "tool_call_id": call["id"], "content": "wrote " + text}]
print(chat(messages)["choices"][0]["message"]["content"])
'''


@pytest.fixture(scope="module", autouse=True)
def private_upstreams():
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    yield
    os.environ.pop("SERVICE_EGRESS_ALLOW_PRIVATE", None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(api, docker_client):
    host = docker0_address(docker_client)
    with ProviderServer(host="0.0.0.0") as provider:
        provider.script(Turn(text="", tool_calls=[ToolCall("write", {"text": "A"}, id="call_w1")], input_tokens=100, output_tokens=20),
                        Turn(text="Wrote A to out.txt.", input_tokens=150, output_tokens=10))
        await upload(api, {
            "version": 1, "id": "atif-export", "base": PYTHON, "task": {"prompt": "write A to out.txt"},
            "agent": {"type": "cli", "binary": "python3", "args": ["-c", AGENT], "timeout": "60s"},
            "secrets": {"OPENAI_KEY": "env"},
            "models": {"providers": {"openai": {"key": "OPENAI_KEY", "base_url": f"http://{host}:{provider.port}/v1"}}},
            "invariants": {"answer": inv({"type": "file_content", "path": "out.txt", "equals": "A"}),
                           "polite": inv({"type": "file_content", "path": "out.txt", "contains": "please"})},
            "resources": {"timeout": "3m"},
        })
        finished = await run_spec(api, spec_id="atif-export", secrets={"OPENAI_KEY": OPENAI_KEY})
    assert finished["models"]["calls"] == 2, finished
    return finished


async def test_svc_runs_export_atif_writes_a_valid_trajectory_of_the_run(api, run, tmp_path):
    path = tmp_path / "run.atif.json"
    code, out, err = await svc_cli(api, "runs", "export", run["id"], "--atif", "-o", str(path))
    assert code == 0, err
    raw = path.read_text()
    doc = Trajectory.model_validate_json(raw)
    assert doc.schema_version == "ATIF-v1.8" and doc.session_id == run["id"]
    assert [(s.step_id, s.source) for s in doc.steps] == [(1, "system"), (2, "user"), (3, "agent"), (4, "agent")]
    assert (doc.steps[0].message, doc.steps[1].message) == ("You write files.", "write A to out.txt")
    asked, answered = doc.steps[2], doc.steps[3]
    assert [(c.tool_call_id, c.function_name, c.arguments) for c in asked.tool_calls] == [("call_w1", "write", {"text": "A"})]
    assert [(r.source_call_id, r.content) for r in asked.observation.results] == [("call_w1", "wrote A")]
    assert (asked.model_name, asked.metrics.prompt_tokens, asked.metrics.completion_tokens) == ("gpt-4o-mini", 100, 20)
    assert answered.message == "Wrote A to out.txt." and answered.metrics.prompt_tokens == 150
    assert (doc.final_metrics.total_prompt_tokens, doc.final_metrics.total_completion_tokens, doc.final_metrics.total_steps) == (250, 30, 4)

    svc = doc.extra["svc"]
    assert (svc["run_id"], svc["status"], svc["verdict"]) == (run["id"], "failed", run["verdict"])
    assert {r["invariant_id"]: r["status"] for r in svc["invariant_results"]} == {"answer": "passed", "polite": "failed"}
    assert svc["cost"] == run["cost"] and svc["models"]["calls"] == 2
    assert [m["model"] for m in svc["effects"]["models"]] == ["gpt-4o-mini"]
    assert OPENAI_KEY not in raw


async def test_the_same_document_from_the_api_and_the_default_export(api, run, tmp_path):
    response, body = await api.get(f"/v1/runs/{run['id']}/atif")
    assert response.status == 200 and Trajectory.model_validate(body).steps[3].message == "Wrote A to out.txt."
    code, out, err = await svc_cli(api, "runs", "export", run["id"])
    assert code == 0 and json.loads(out)["run_id"] == run["id"], err  # without --atif: svc's own trajectory


async def test_an_exported_trajectory_reads_back_into_the_runs_trace(api, run, tmp_path):
    path = tmp_path / "run.atif.json"
    code, out, err = await svc_cli(api, "runs", "export", run["id"], "--atif", "-o", str(path))
    assert code == 0, err
    code, out, err = await svc_cli(api, "traces", "import", str(path), "--run", run["id"], "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert (answer["run_id"], answer["steps"]) == (run["id"], 4)
    response, page = await api.get(f"/v1/spans?trace_id={answer['trace_id']}&order=asc")
    assert [(s["event_type"], s["tool"]) for s in page["items"]] == [
        ("span", "atif python3"), ("span", "system message"), ("span", "user message"), ("llm_call", "gpt-4o-mini"),
        ("tool_call", "write"), ("llm_call", "gpt-4o-mini")]
    assert {s["run_id"] for s in page["items"]} == {run["id"]}
