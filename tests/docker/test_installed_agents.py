"""Installed agents for real: Claude Code, Codex CLI and mini-swe-agent, each installed from its
registry (npm, PyPI) into a layer on the stock python image, run headless on a small task whose
model is a fake provider the test starts on a host address, reached only through the sandbox's
model gateway, in the agent's own wire format (Anthropic Messages streamed with `tool_use`,
OpenAI Responses, Chat Completions through LiteLLM).

The scripted model has the agent write hello.txt with a shell tool, then says it is done: the
run passes, its model calls are `llm_call` events in its trace, and its agent is named with
its version. Scripted to write the wrong word, the same agent's run fails.

The layers are built on first use (minutes: npm and PyPI through the machine's proxy) and
reused after by their digest."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Callable

import pytest
import pytest_asyncio

from tests.support.images import PYTHON
from tests.support.provider_server import ProviderServer, ToolCall, Turn
from tests.support.runs import inv, start_run, upload
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "sk-installed-agents-0123456789abcdef"
BUILD_AND_RUN_S = 1500  # a layer not built yet is built inside the first run


@pytest.fixture(scope="module")
def host_ip(docker_client) -> str:
    """docker0's address: a host address the gateway reaches only with private addresses allowed."""
    import ipaddress

    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


@pytest.fixture(scope="module", autouse=True)
def private_upstreams():
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    yield
    os.environ.pop("SERVICE_EGRESS_ALLOW_PRIVATE", None)


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


async def run_agent(api, host_ip: str, name: str, word: str) -> tuple[dict, list[dict], list[dict]]:
    """One run of the agent against its own fake provider: (run, its llm_call events, the requests)."""
    _, _, kind, model = AGENTS[name]
    with ProviderServer(host="0.0.0.0") as provider:
        provider.respond = model(word)
        root = f"http://{host_ip}:{provider.port}"
        await upload(api, agent_spec(name, word, f"{root}/v1" if kind == "openai" else root))
        queued = await start_run(api, f"installed-{name}-{word}", secrets={"PROVIDER_KEY": KEY})
        run = await wait_ended(api, queued["id"])
        requests = list(provider.requests)
    response, page = await api.get(f"/v1/traces?run_id={run['id']}&limit=200")
    assert response.status == 200, page
    return run, [e for e in page["items"] if e["event_type"] == "llm_call"], requests


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runs(api, host_ip) -> dict[tuple[str, str], tuple[dict, list[dict], list[dict]]]:
    """Every agent once scripted right and once scripted wrong, all started together."""
    cases = [(name, word) for name in SELECTED for word in ("hello", "goodbye")]
    done = await asyncio.gather(*(run_agent(api, host_ip, name, word) for name, word in cases))
    return dict(zip(cases, done))


def seen(run: dict, calls: list[dict]) -> tuple:
    """What a run shows: status, its check, the agent with its version, whether its model calls
    are in its trace and counted by the gateway."""
    hello = {r["invariant_id"]: r["status"] for r in run["invariant_results"]}.get("hello")
    agent = run["agent"] or {}
    return (run["status"], hello, (agent.get("name"), agent.get("version")),
            len(calls) > 0 and len(calls) == (run.get("models") or {}).get("calls"))


@pytest.mark.parametrize("name", SELECTED)
async def test_an_installed_agent_solves_the_task_through_the_gateway(runs, name):
    run, calls, requests = runs[(name, "hello")]
    assert seen(run, calls) == ("passed", "passed", (f"{name}@{AGENTS[name][0]}", AGENTS[name][0]), True), \
        (run, requests[-3:])


@pytest.mark.parametrize("name", SELECTED)
async def test_an_installed_agent_whose_model_does_the_wrong_thing_fails(runs, name):
    run, calls, requests = runs[(name, "goodbye")]
    assert seen(run, calls) == ("failed", "failed", (f"{name}@{AGENTS[name][0]}", AGENTS[name][0]), True), \
        (run, requests[-3:])


async def test_each_agent_has_one_layer_for_its_runs_and_no_ca_bundle_in_it(runs, docker_client):
    """Both runs of an agent boot from the one layer tagged by its digest; the CA bundle the build
    downloaded with was a mount, so the image holds at most its empty mount point."""
    layers = {name: {runs[(name, word)][0]["agent"]["layer"] for word in ("hello", "goodbye")} for name in SELECTED}
    leaked = [layer for layer in sorted(set().union(*layers.values())) if docker_client.containers.run(
        layer, ["sh", "-c", "test -s /run/svc-build/ca.crt && echo leaked || true"], remove=True).strip()]
    assert ([len(v) for v in layers.values()], leaked) == ([1] * len(SELECTED), []), layers


async def test_a_pooled_sandbox_boots_from_the_agents_layer(host_ip):
    """The warm pool's shape holds the layer: once a run asked for it, the next run of the spec
    claims a pooled sandbox booted from the layer, and its agent still solves the task."""
    from tests.support.api import start_api, stop_api

    pooled_api = await start_api(pool_size=1)
    try:
        with ProviderServer(host="0.0.0.0") as provider:
            name = SELECTED[0]
            _, _, kind, model = AGENTS[name]
            provider.respond = model("hello")
            root = f"http://{host_ip}:{provider.port}"
            await upload(pooled_api, agent_spec(name, "hello", f"{root}/v1" if kind == "openai" else root))
            first = await start_run(pooled_api, f"installed-{name}-hello", secrets={"PROVIDER_KEY": KEY})
            await wait_ended(pooled_api, first["id"])  # it asked for the shape: the pool fills

            async def pooled():
                response, body = await pooled_api.get("/v1/health")
                return sum(body["sandbox_pool"]["pooled"].values()) >= 1 or None

            await wait_for(pooled, timeout=120, what=f"a pooled sandbox of the {name} layer", interval=0.5)
            second = await start_run(pooled_api, f"installed-{name}-hello", secrets={"PROVIDER_KEY": KEY})
            run = await wait_ended(pooled_api, second["id"])
        response, sandbox = await pooled_api.get(f"/v1/sandboxes/{run['sandbox_id']}")
        assert (run["status"], sandbox["boot"]["pooled"], sandbox["image"]) == \
            ("passed", True, run["agent"]["layer"]), (run, sandbox)
    finally:
        await stop_api(pooled_api)
