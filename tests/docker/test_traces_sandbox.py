"""Traces from inside a real sandbox: an agent using the single-file SDK (svc_tracing, mounted by
the daemon) and the real `openai` library, talking to an OpenAI-compatible http_mock service on the
sandbox network, sends its llm_call / tool_use / tool_call tree over the daemon's Unix socket,
stamped with the sandbox id."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.main import start_unix_sites
from tests.support.api import start_api, stop_api
from tests.support.specs import spec
from daemon.appkeys import SETTINGS, TRACE_WRITER

pytestmark = pytest.mark.asyncio(loop_scope="function")
openai = pytest.importorskip("openai")

COMPLETION = {
    "id": "chatcmpl-mock", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "refusal": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"weather\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}},
        ]}}],
    "usage": {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220},
}

AGENT = """
import json, os, sys
sys.path.insert(0, "/workspace/.deps")
from openai import OpenAI
from svc_tracing import trace, tool_call, wrap_openai

client = wrap_openai(OpenAI(base_url="http://llm/v1", api_key="sk-sandbox-secret-0123456789abcdef", max_retries=0))

def run(name, arguments):
    if name == "read_file":
        return open(os.path.join("/workspace", json.loads(arguments)["path"])).read()
    return "sunny"

@trace(name="agent")
def main():
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": os.environ.get("SERVICE_TASK_PROMPT", "go")}],
                                           tools=[{"type": "function", "function": {"name": "search"}}])
    for call in reply.choices[0].message.tool_calls:
        with tool_call(call.function.name, call.function.arguments, tool_call_id=call.id) as t:
            t.set_output(run(call.function.name, call.function.arguments))
    return "done"

print(main())
"""


def openai_dependencies() -> list[Path]:
    """The site-packages entries `openai` needs (found by importing it and making a call)."""
    code = (
        "import sys, openai\n"
        "c = openai.OpenAI(api_key='x', base_url='http://127.0.0.1:9/v1', max_retries=0)\n"
        "try:\n    c.chat.completions.create(model='m', messages=[])\nexcept Exception:\n    pass\n"
        "site = [p for p in sys.path if p.endswith('site-packages')][0]\n"
        "print(site)\n"
        "print('\\n'.join(sorted({m.split('.')[0] for m, mod in list(sys.modules.items())"
        " if (getattr(mod, '__file__', None) or '').startswith(site)})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    site, names = Path(out[0]), [n for n in out[1:] if not n.startswith("_")]
    found = []
    for name in names:
        for candidate in (site / name, site / f"{name}.py"):
            if candidate.exists():
                found.append(candidate)
        found += [p for p in site.glob("*.dist-info") if p.name.split("-")[0].lower().replace("_", "") == name.lower().replace("_", "")]
    return found


async def test_agent_in_a_real_sandbox_sends_its_trace(stock_images):
    api = await start_api()
    # Both sockets, as svcd serves them; the sandbox extension mounts the sandbox socket into the agent.
    await start_unix_sites(api.client.server.runner, api.app[SETTINGS])
    try:
        doc = spec(
            "traced-agent",
            services=[{"name": "llm", "type": "http_mock", "routes": [
                {"method": "POST", "path": "/v1/chat/completions", "response": {"status": 200, "headers": {"Content-Type": "application/json"},
                                                                                "body": COMPLETION}}]}],
            agent={"type": "cli", "binary": "python3"},
        )
        sandbox = await api.create_from_spec(doc)
        assert sandbox["state"] == "ready", sandbox
        sandbox_id = sandbox["id"]
        workspace = Path(api.manager.workspace_path(sandbox_id))
        deps = workspace / ".deps"
        deps.mkdir()
        for entry in openai_dependencies():
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, deps / entry.name)
        (workspace / "agent.py").write_text(AGENT)
        (workspace / "notes.txt").write_text("bring an umbrella")

        env = await api.run(sandbox_id, "echo $SERVICE_BASE_URL; echo $PYTHONPATH; test -S /run/svc/svcd.sock && echo socket")
        assert env["stdout"].split() == ["unix:///run/svc/svcd.sock", "/opt/svc/python", "socket"], env
        result = await api.run(sandbox_id, "python3 /workspace/agent.py", timeout="60s")
        assert result["exit_code"] == 0 and result["stdout"].strip() == "done", result

        await api.app[TRACE_WRITER].flush()
        response, page = await api.get(f"/v1/sandboxes/{sandbox_id}/trace?limit=1000")
        assert response.status == 200 and page["count"] == 9, page  # agent start/end, llm_call, 2 tool_use, 2 x tool_call start/end
        assert {e["sandbox_id"] for e in page["items"]} == {sandbox_id} and {e["source"] for e in page["items"]} == {"sandbox"}
        (trace_id,) = {e["trace_id"] for e in page["items"]}
        _, detail = await api.get(f"/v1/traces/{trace_id}")
        shape = [(s["depth"], s["event_type"], s["tool"]) for s in detail["spans"]]
        assert shape == [(0, "span", "agent"), (1, "llm_call", "openai.chat.completions.create"), (2, "tool_use", "search"),
                         (2, "tool_use", "read_file"), (2, "tool_call", "search"), (2, "tool_call", "read_file")], shape
        llm = detail["spans"][1]
        assert llm["cost"]["model"] == "gpt-4o-mini-2024-07-18" and llm["cost"]["input_tokens"] == 200
        assert llm["cost"]["estimated_usd"] == pytest.approx((200 * 0.15 + 20 * 0.60) / 1e6)
        assert detail["spans"][5]["output"] == "bring an umbrella" and detail["sandbox_id"] == sandbox_id
        assert "sk-sandbox-secret" not in json.dumps(detail)
        response, _ = await api.delete(f"/v1/sandboxes/{sandbox_id}")
        assert response.status == 204
    finally:
        await stop_api(api)
