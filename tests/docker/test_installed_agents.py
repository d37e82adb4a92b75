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

import pytest
import pytest_asyncio

from tests.support.installed_agents import AGENTS, KEY, SELECTED, agent_spec, wait_ended
from tests.support.provider_server import ProviderServer
from tests.support.runs import start_run, upload
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")



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
