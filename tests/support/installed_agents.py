"""The installed agents' tests share: each agent's version, model, wire format and scripted model
(tests/docker/test_installed_agents.py on the local engine, tests/swarm/test_swarm_installed_agent.py on
the swarm), the spec of the small task and waiting for a run to end."""
from __future__ import annotations

import os
from typing import Any, Callable

from tests.support.images import PYTHON
from tests.support.provider_server import ToolCall, Turn
from tests.support.runs import inv
from tests.support.waiting import wait_for

KEY = "sk-installed-agents-0123456789abcdef"
BUILD_AND_RUN_S = 1500  # a layer not built yet is built inside the first run


def write(word: str) -> str:
    return f"printf {word} > hello.txt"


def claude_model(word: str) -> Callable[[dict[str, Any]], Turn]:
    """Anthropic Messages: Bash with the command, then text once the tool's result is back. A side
    call without the tools (a title, a summary) gets text."""
    def respond(request: dict[str, Any]) -> Turn:
        body = request["body"] if isinstance(request["body"], dict) else {}
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        answered = any(isinstance(m.get("content"), list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                                  for b in m["content"])
                       for m in body.get("messages") or [] if isinstance(m, dict))
        if "Bash" not in tools or answered:
            return Turn(text="Done.")
        return Turn(tool_calls=[ToolCall("Bash", {"command": write(word), "description": "write hello.txt"},
                                         id="toolu_01")])
    return respond


def codex_model(word: str) -> Callable[[dict[str, Any]], Turn]:
    """OpenAI Responses: its shell tool (whichever of the shapes this Codex version declares), then
    text once the call's output is in the input."""
    def respond(request: dict[str, Any]) -> Turn:
        body = request["body"] if isinstance(request["body"], dict) else {}
        items = body.get("input") if isinstance(body.get("input"), list) else []
        if any(isinstance(i, dict) and str(i.get("type", "")).endswith("_output") for i in items):
            return Turn(text="Done.")
        names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if "shell" in names:
            call = ToolCall("shell", {"command": ["bash", "-lc", write(word)]})
        elif "shell_command" in names:
            call = ToolCall("shell_command", {"command": write(word)})
        elif "exec_command" in names:
            call = ToolCall("exec_command", {"cmd": write(word)})
        else:
            return Turn(text=f"no shell tool in {sorted(n for n in names if n)}")
        return Turn(tool_calls=[call])
    return respond


def mini_model(word: str) -> Callable[[dict[str, Any]], Turn]:
    """Chat Completions: its bash tool with the command, then the command that submits."""
    def respond(request: dict[str, Any]) -> Turn:
        body = request["body"] if isinstance(request["body"], dict) else {}
        done = sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool")
        command = write(word) if done == 0 else "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        return Turn(text="THOUGHT: one step.", tool_calls=[ToolCall("bash", {"command": command}, id=f"call_{done}")])
    return respond


AGENTS = {
    "claude-code": ("2.1.332", "claude-sonnet-4-5", "anthropic", claude_model),
    "codex": ("0.171.0", "gpt-5-codex", "openai", codex_model),
    "mini-swe-agent": ("2.4.6", "gpt-4o-mini", "openai", mini_model),
}
# `make test` runs one representative agent (building an agent's layer takes 40 s to 7 minutes on a
# fresh machine); `make test-agents` runs all three (SVC_INSTALLED_AGENTS=claude-code,codex,mini-swe-agent).
SELECTED = [name for name in os.environ.get("SVC_INSTALLED_AGENTS", "claude-code").split(",") if name in AGENTS]


def agent_spec(name: str, word: str, base_url: str) -> dict[str, Any]:
    version, model, provider, _ = AGENTS[name]
    return {
        "version": 1, "id": f"installed-{name}-{word}", "base": PYTHON,
        "task": {"prompt": "Create the file hello.txt in the current directory containing the word hello."},
        "agent": {"type": "installed", "name": name, "version": version, "model": model, "max_turns": 6, "timeout": "150s"},
        "secrets": {"PROVIDER_KEY": "env"},
        "models": {"providers": {provider: {"key": "PROVIDER_KEY", "base_url": base_url}}},
        "invariants": {"hello": inv({"type": "file_content", "path": "hello.txt", "equals": "hello"})},
        "resources": {"timeout": "4m"},
    }


async def wait_ended(api, run_id: str) -> dict[str, Any]:
    """The run once it ended; polled slowly enough that six at once stay under the rate limit."""
    async def ended():
        response, run = await api.get(f"/v1/runs/{run_id}")
        return run if response.status == 200 and run["status"] in ("passed", "failed", "errored") else None

    return await wait_for(ended, timeout=BUILD_AND_RUN_S, what=f"run {run_id} ended", interval=1.0)
