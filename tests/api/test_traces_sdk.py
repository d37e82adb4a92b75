"""End to end: an agent process using the tracing SDK and the real `openai` library (against a
local fake OpenAI server) sends its trace to the in-process daemon — over TCP with a sandbox token,
over the Unix socket, and with only an API key."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from aiohttp import web

from daemon import auth
from tests.support.store import add_sandbox
from daemon.appkeys import DEFAULT_TENANT_ID, STORE, TRACE_WRITER

pytest.importorskip("openai")
REPO = Path(__file__).resolve().parents[2]

AGENT = textwrap.dedent("""
    import json, os
    from openai import OpenAI
    from client.tracing import trace, tool_call, wrap_openai

    client = wrap_openai(OpenAI(base_url=os.environ["FAKE_OPENAI"], api_key="sk-agent-secret-abcdef0123456789", max_retries=0))
    TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("search", "read_file")]

    def run(name, arguments):
        if name == "read_file":
            raise FileNotFoundError(json.loads(arguments)["path"])
        return "sunny"

    @trace(name="solve")
    def solve(task):
        messages = [{"role": "user", "content": task}]
        reply = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append({"role": "assistant", "tool_calls": [c.model_dump() for c in message.tool_calls]})
        for call in message.tool_calls:
            try:
                with tool_call(call.function.name, call.function.arguments, tool_call_id=call.id) as t:
                    result = run(call.function.name, call.function.arguments)
                    t.set_output(result)
            except FileNotFoundError as exc:
                result = f"error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        final = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        return final.choices[0].message.content

    print(solve("what is the weather?"))
""")


async def run_agent(tmp_path: Path, env: dict[str, str]) -> str:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(sys.executable, str(script), env={**base, **env}, cwd=str(tmp_path),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def check_agent_trace(detail: dict, sandbox_id: str | None) -> None:
    spans = detail["spans"]
    shape = [(s["depth"], s["event_type"], s["tool"]) for s in spans]
    assert shape == [
        (0, "span", "solve"),
        (1, "llm_call", "openai.chat.completions.create"),
        (2, "tool_use", "search"),
        (2, "tool_use", "read_file"),
        (2, "tool_call", "search"),
        (2, "tool_call", "read_file"),
        (1, "llm_call", "openai.chat.completions.create"),
    ], shape
    solve, llm1, use1, use2, search, read, llm2 = spans
    assert json.loads(solve["input"]) == {"task": "what is the weather?"} and json.loads(solve["output"]) == "All done."
    assert solve["phases"] == ["start", "end"] and solve["status"] == "ok"
    assert llm1["cost"]["model"] == "gpt-4o-2024-08-06" and llm1["cost"]["input_tokens"] == 120 and llm1["cost"]["priced_as"] == "gpt-4o"
    assert llm1["cost"]["estimated_usd"] == pytest.approx((100 * 2.5 + 20 * 1.25 + 30 * 10) / 1e6)
    assert search["parent_span_id"] == read["parent_span_id"] == llm1["span_id"]
    assert search["status"] == "ok" and search["output"] == "sunny" and search["metadata"]["tool_use_span_id"] == use1["span_id"]
    assert read["status"] == "error" and read["error_type"] == "tool_error" and "a.txt" in read["output"]
    assert detail["total_cost_usd"] == pytest.approx(2 * llm1["cost"]["estimated_usd"])
    assert {s["sandbox_id"] for s in spans} == {sandbox_id}
    assert "sk-agent-secret" not in json.dumps(detail)


async def test_agent_in_a_sandbox_over_tcp_with_its_token(api, provider, tmp_path):  # noqa: F811
    await add_sandbox(api, "sbx_agent")
    # as the runner boots it: with a sandbox token the run id comes from here, not from the agent
    await api.app[STORE].execute("UPDATE sandboxes SET metadata = ? WHERE id = ?", ('{"run_id": "run_e2e"}', "sbx_agent"))
    token = await auth.create_sandbox_token(api.app[STORE], api.app[DEFAULT_TENANT_ID], "sbx_agent")
    out = await run_agent(tmp_path, {
        "FAKE_OPENAI": provider.url + "/v1",
        "SERVICE_SANDBOX_ID": "sbx_agent", "SERVICE_SANDBOX_TOKEN": token,
        "SERVICE_BASE_URL": str(api.client.make_url("")).rstrip("/"),
        "SERVICE_RUN_ID": "run_e2e", "SERVICE_AGENT": "weather-bot", "SERVICE_AGENT_VERSION": "4",
    })
    assert out.strip() == "All done."
    await api.app[TRACE_WRITER].flush()
    _, page = await api.get("/v1/sandboxes/sbx_agent/trace?limit=1000")
    assert page["count"] == 10  # solve start/end, 2 llm_call, 2 tool_use, 2 x tool_call start/end
    assert {e["sandbox_id"] for e in page["items"]} == {"sbx_agent"} and {e["run_id"] for e in page["items"]} == {"run_e2e"}
    trace_ids = {e["trace_id"] for e in page["items"]}
    assert len(trace_ids) == 1
    _, detail = await api.get(f"/v1/traces/{trace_ids.pop()}")
    check_agent_trace(detail, "sbx_agent")
    _, agent = await api.get("/v1/agents/weather-bot/traces?version=4")
    assert agent["metrics"]["tool_calls"] == 2 and agent["metrics"]["tool_success_rate"] == 0.5
    assert agent["metrics"]["llm_calls"] == 2 and set(agent["metrics"]["tools"]) == {"search", "read_file"}


async def test_agent_over_the_unix_socket_with_an_api_key(api, provider, tmp_path):  # noqa: F811
    sock = tmp_path / "svcd.sock"
    site = web.UnixSite(api.client.server.runner, str(sock))
    await site.start()
    try:
        await run_agent(tmp_path, {"FAKE_OPENAI": provider.url + "/v1", "SERVICE_API_KEY": api.key, "SERVICE_BASE_URL": f"unix://{sock}"})
    finally:
        await site.stop()
    _, page = await api.get("/v1/traces?limit=1000")
    assert page["count"] == 10 and {e["sandbox_id"] for e in page["items"]} == {None}
    assert {e["source"] for e in page["items"]} == {"api"}
    _, detail = await api.get(f"/v1/traces/{page['items'][0]['trace_id']}")
    check_agent_trace(detail, None)


async def test_agent_without_routing_env_sends_nothing(api, provider, tmp_path):  # noqa: F811
    out = await run_agent(tmp_path, {"FAKE_OPENAI": provider.url + "/v1"})
    assert out.strip() == "All done."
    _, page = await api.get("/v1/traces")
    assert page["count"] == 0
