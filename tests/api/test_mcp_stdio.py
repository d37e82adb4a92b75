"""`svc mcp serve` as a real subprocess, driven over stdio by the official MCP client, against the
in-process daemon (TCP) running experiments with the deterministic scenario runner: every one of
the ten tools is called and its data checked, and every tool's inputs mirror its command's flags."""
from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from client.cli import build_parser
from tests.support.cli import cli_environ
from tests.support.experiments import FakeRunner, run_experiment, start, upload
from tests.support.procs import ROOT
from tests.support.scores import add_llm_spans, create_rule, score
from tests.support.specs import spec_yaml

# tool -> the command whose flags it mirrors
COMMANDS = {
    "svc_eval_run": ("eval", "run"), "svc_eval_list": ("eval", "list"), "svc_eval_get": ("eval", "get"),
    "svc_eval_metrics": ("eval", "metrics"), "svc_eval_compare": ("eval", "compare"),
    "svc_logs_traces": ("logs", "traces"), "svc_logs_trace": ("logs", "trace"), "svc_logs_spans": ("logs", "spans"),
    "svc_logs_scenarios": ("logs", "scenarios"), "svc_logs_scores": ("logs", "scores"),
}
# flags that shape the terminal output, not the data: a tool answers JSON anyway
OUTPUT_ONLY = {"json", "quiet", "no_wait", "output", "format", "summary", "help", "junit", "markdown", "html"}
POSITIONAL_NAMES = {"spec": "spec_path", "experiments": "candidate_id"}
# a flag naming a resource by id is `<resource>_id` in every tool
FLAG_NAMES = {"spec": "spec_id", "experiment": "experiment_id", "trace": "trace_id", "span": "span_id", "parent_span": "parent_span_id",
              "root_span": "root_span_id", "sandbox": "sandbox_id", "run": "run_id", "scenario": "scenario_id", "rule": "rule_id",
              "baseline": "baseline_bundle"}


@pytest.fixture
def runner():
    return FakeRunner()


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


@asynccontextmanager
async def mcp_session(api, tmp_path):
    env = cli_environ(api.base_url(), api.key, tmp_path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "client.cli", "mcp", "serve"], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session, tool_name, **arguments):
    result = await session.call_tool(tool_name, arguments)
    assert not result.isError, result.content[0].text
    return json.loads(result.content[0].text)


async def error_of(session, tool, **arguments) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.isError
    return result.content[0].text


@pytest.fixture
async def mixed(api):
    spec = await upload(api, spec_yaml("mixed", matrix=[{"mode": "pass"}, {"mode": "fail"}]))
    return await run_experiment(api, name="mixed", spec_id=spec["id"])


def command_flags(path: tuple[str, str]) -> set[str]:
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if a.dest in ("command", "action")).choices[name]
    names = set()
    for action in parser._actions:
        if action.option_strings:
            long = max(action.option_strings, key=len).lstrip("-").replace("-", "_")
            names.add(FLAG_NAMES.get(long, long))
        else:
            names.add(POSITIONAL_NAMES.get(action.dest, action.dest))
    return names - OUTPUT_ONLY


async def test_every_tool_takes_its_commands_flags(api, tmp_path):
    async with mcp_session(api, tmp_path) as session:
        tools = {t.name: set(t.inputSchema["properties"]) for t in (await session.list_tools()).tools}
    missing = {tool: command_flags(path) - tools[tool] for tool, path in COMMANDS.items()}
    assert missing == {tool: set() for tool in COMMANDS}


async def test_eval_run_returns_results_with_the_given_seed(api, tmp_path):
    spec = tmp_path / "mixed.yaml"
    spec.write_text(spec_yaml("mixed", matrix=[{"mode": "pass"}, {"mode": "fail"}]))
    async with mcp_session(api, tmp_path) as session:
        results = await call(session, "svc_eval_run", spec_path=str(spec), name="via-mcp", seed="seed-42", poll="50ms")
    assert (results["name"], results["status"], results["seed"], len(results["scenarios"])) == ("via-mcp", "completed", "seed-42", 2)


async def test_eval_run_gives_up_after_wait_timeout(api, tmp_path, runner):
    spec = tmp_path / "slow.yaml"
    spec.write_text(spec_yaml("slow", matrix=[{"mode": "block"}]))
    async with mcp_session(api, tmp_path) as session:
        message = await error_of(session, "svc_eval_run", spec_path=str(spec), poll="50ms", wait_timeout="300ms")
    runner.release.set()
    assert "did not finish within 0.3s" in message


async def test_eval_run_names_a_bad_poll(api, tmp_path):
    async with mcp_session(api, tmp_path) as session:
        message = await error_of(session, "svc_eval_run", spec_path=str(tmp_path / "x.yaml"), poll="soon")
    assert message.startswith("poll:") or "poll:" in message


async def test_eval_list_get_and_metrics(api, tmp_path, mixed):
    async with mcp_session(api, tmp_path) as session:
        listed = await call(session, "svc_eval_list", spec_id="mixed")
        got = await call(session, "svc_eval_get", experiment_id=mixed["id"])
        metrics = await call(session, "svc_eval_metrics", experiment_id=mixed["id"])
    assert [e["id"] for e in listed["items"]] == [mixed["id"]]
    assert sorted(s["verdict"] for s in got["scenarios"]) == ["fail", "pass"]
    assert metrics["tool_breakdown"]["write_file"]["count"] == 2


async def test_eval_compare_with_gate(api, tmp_path, mixed):
    spec = await upload(api, spec_yaml("mixed", matrix=[{"mode": "fail"}, {"mode": "fail"}]))
    worse = await run_experiment(api, name="worse", spec_id=spec["id"])
    async with mcp_session(api, tmp_path) as session:
        result = await call(session, "svc_eval_compare", baseline_id=mixed["id"], candidate_id=worse["id"], gate=True,
                            gate_thresholds=True)
    assert (result["regressed"], result["gate_passed"]) == (True, False)


async def test_logs_traces_spans_and_one_trace(api, tmp_path, mixed):
    async with mcp_session(api, tmp_path) as session:
        events = await call(session, "svc_logs_traces", experiment_id=mixed["id"], tool="write_file")
        spans = await call(session, "svc_logs_spans", experiment_id=mixed["id"], event_type="tool_call")
        trace = await call(session, "svc_logs_trace", trace_id=events["items"][0]["trace_id"])
    assert sorted(e["status"] for e in events["items"]) == ["error", "ok"]
    assert spans["count"] == 4
    assert {s["tool"] for s in trace["spans"]} == {"read_file", "write_file"}


async def test_logs_scenarios_filters_by_status(api, tmp_path, mixed):
    async with mcp_session(api, tmp_path) as session:
        failed = await call(session, "svc_logs_scenarios", experiment_id=mixed["id"], status="failed")
    assert [s["matrix_entry"] for s in failed["items"]] == [{"mode": "fail"}]


async def test_logs_scores_reads_the_experiments_scores(api, tmp_path, mixed):
    await add_llm_spans(api, mixed["id"], ["a refund was issued", "no luck"])
    rule = await create_rule(api, name="refunds", type="regex", pattern=r"refund", applies_to={"event_type": "llm_call"})
    await create_rule(api, name="other", type="regex", pattern=r"luck", applies_to={"event_type": "llm_call"})
    await score(api, mixed["id"])
    async with mcp_session(api, tmp_path) as session:
        scores = await call(session, "svc_logs_scores", experiment_id=mixed["id"], rule_id=rule["id"])
    assert sorted((row["span_id"], row["passed"]) for row in scores["items"]) == [("span_llm_0", True), ("span_llm_1", False)]


async def test_a_page_size_out_of_bounds_is_refused(api, tmp_path, mixed):
    async with mcp_session(api, tmp_path) as session:
        message = await error_of(session, "svc_logs_traces", page_size=5000)
    assert "page_size" in message
