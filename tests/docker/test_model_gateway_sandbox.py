"""The model gateway in real sandboxes: an agent using the official `openai` and `anthropic` Python
SDKs (installed in a test image from PyPI), with no svc code and no instrumentation, talks to a fake
provider the test starts on a host address, reached only through its sandbox's gateway (the
operator's private-address switch SERVICE_EGRESS_ALLOW_PRIVATE is on, as for the egress tests).

What a user sees: every call is an `llm_call` in the run's trace with its tokens and price and a
`tool_use` per requested tool; the run says what the models cost; the budget stops the call past
it and errors the run; a recorded run replays with the provider stopped, to the same verdict and
the same workspace, and a replay whose agent asks something new ends `replay_diverged`."""
from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from daemon.appkeys import SETTINGS
from daemon.main import start_unix_sites
from tests.support.hosts import docker0_address
from tests.support.provider_server import ProviderServer, ToolCall, Turn
from tests.support.runs import inv, run_spec, upload, wait_run
from tests.support.sdk_image import sdk_image

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPENAI_KEY = "sk-gatewaytest-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-gatewaytest-0123456789abcdef"
SECRETS = {"OPENAI_KEY": OPENAI_KEY, "ANTHROPIC_KEY": ANTHROPIC_KEY}

# Three calls: a chat completion asking for a tool, a streamed chat completion, an Anthropic
# message stream asking for a tool; the answers end up in out.txt.
AGENT = r'''
import json, os
from openai import OpenAI
from anthropic import Anthropic
from svc_tracing import wrap_openai  # the agent also traces its OpenAI calls itself: not counted twice
tools = [{"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}]
prompt = os.environ["SERVICE_TASK_PROMPT"]
openai = wrap_openai(OpenAI())
first = openai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], tools=tools)
a = json.loads(first.choices[0].message.tool_calls[0].function.arguments)["text"]
stream = openai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "and?"}], stream=True,
                                        stream_options={"include_usage": True})
b = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
with Anthropic().messages.stream(model="claude-3-5-haiku-20241022", max_tokens=64, messages=[{"role": "user", "content": "last"}],
                                 tools=[{"name": "write", "input_schema": {"type": "object"}}]) as s:
    message = s.get_final_message()
c = next(block.input["text"] for block in message.content if block.type == "tool_use")
open("/workspace/out.txt", "w").write(f"{a}|{b}|{c}")
'''

KEY_NOWHERE = ("! grep -rqsF -e {o} -e {a} /proc/[0-9]*/environ /workspace /etc /tmp /root /agent"
               .format(o=OPENAI_KEY, a=ANTHROPIC_KEY))


def turns(last: str = "C") -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("write", {"text": "A"})], input_tokens=100, output_tokens=20),
            Turn(text="B", input_tokens=50, output_tokens=10, gap_s=0.01),
            Turn(tool_calls=[ToolCall("write", {"text": last}, id="toolu_1")], input_tokens=30, output_tokens=7)]


@pytest.fixture(scope="module")
def image(docker_client, stock_images) -> str:
    return sdk_image(docker_client)


@pytest.fixture(scope="module")
def host_ip(docker_client) -> str:
    """docker0's address: a host address the gateway reaches only with private addresses allowed."""
    return docker0_address(docker_client)


@pytest.fixture(scope="module", autouse=True)
def private_upstreams():
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    yield
    os.environ.pop("SERVICE_EGRESS_ALLOW_PRIVATE", None)


@pytest.fixture
def provider():
    with ProviderServer(host="0.0.0.0") as server:
        yield server


def upstream(provider: ProviderServer, host_ip: str) -> str:
    return f"http://{host_ip}:{provider.port}"


def gateway_spec(spec_id: str, image: str, base: str, *, expect: str = "A|B|C", budget: dict | None = None) -> dict:
    return {
        "version": 1, "id": spec_id, "base": image, "task": {"prompt": "answer {{ q }}", "inputs": {"q": "this"}},
        "agent": {"type": "cli", "binary": "python3", "args": ["-c", AGENT], "timeout": "60s"},
        "secrets": {"OPENAI_KEY": "env", "ANTHROPIC_KEY": "env"},
        "models": {"providers": {"openai": {"key": "OPENAI_KEY", "base_url": f"{base}/v1"},
                                 "anthropic": {"key": "ANTHROPIC_KEY", "base_url": base}},
                   **({"budget": budget} if budget else {})},
        "invariants": {
            "answer": inv({"type": "file_content", "path": "out.txt", "equals": expect}),
            "key_nowhere": inv({"type": "command_exit", "command": KEY_NOWHERE, "expect_exit_code": 0}),
        },
        "resources": {"timeout": "3m"},
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(api, image, host_ip):
    """One live run of the three-call agent whose model gets the last answer wrong (so the run
    fails, a failure to replay): (run, provider requests, trace events). The provider is stopped
    when the fixture returns."""
    # both sockets, as svcd serves them: the agent's SDK sends its own trace over the sandbox socket
    await start_unix_sites(api.client.server.runner, api.app[SETTINGS])
    with ProviderServer(host="0.0.0.0") as provider:
        provider.script(*turns(last="wrong"))
        await upload(api, gateway_spec("gw-live", image, upstream(provider, host_ip)))
        run = await run_spec(api, spec_id="gw-live", secrets=SECRETS)
        requests = list(provider.requests)
    response, page = await api.get(f"/v1/traces?run_id={run['id']}&limit=100")
    assert response.status == 200, page
    return run, requests, page["items"]


def verdicts(run: dict) -> dict:
    return {r["invariant_id"]: r["status"] for r in run["invariant_results"]}


async def test_a_live_run_of_an_uninstrumented_agent_is_scored_on_the_models_answers(live):
    run, _, _ = live
    assert (run["status"], verdicts(run), run["models"]["mode"], run["models"]["calls"]) == \
        ("failed", {"answer": "failed", "key_nowhere": "passed"}, "live", 3), run


async def test_every_call_is_an_llm_call_with_its_tokens(live):
    _, _, events = live
    calls = sorted((e["cost"]["model"], e["cost"]["input_tokens"], e["cost"]["output_tokens"])
                   for e in events if e["event_type"] == "llm_call")
    assert calls == [("claude-3-5-haiku-20241022", 30, 7), ("gpt-4o-mini", 50, 10), ("gpt-4o-mini", 100, 20)], events


async def test_the_agents_own_sdk_calls_are_kept_as_spans_not_counted_twice(live):
    _, _, events = live
    own = [e for e in events if (e.get("metadata") or {}).get("counted_by") == "gateway"]
    assert sorted((e["event_type"], e["cost"]) for e in own) == [("span", None)] * 3, events  # 2 calls, 1 tool use


async def test_every_requested_tool_is_a_tool_use(live):
    _, _, events = live
    assert sorted(e["tool"] for e in events if e["event_type"] == "tool_use") == ["write", "write"], events


async def test_the_run_says_what_the_models_cost(live):
    run, _, events = live
    priced = round(sum(e["cost"]["estimated_usd"] for e in events if e["event_type"] == "llm_call"), 6)
    assert (priced > 0, run["models"]["cost_usd"]) == (True, pytest.approx(priced, abs=1e-6)), run["models"]


async def test_the_real_keys_reach_the_provider(live):
    _, requests, _ = live
    seen = {(r["path"], r["headers"].get("Authorization") or r["headers"].get("x-api-key")) for r in requests}
    assert seen == {("/v1/chat/completions", f"Bearer {OPENAI_KEY}"), ("/v1/messages", ANTHROPIC_KEY)}, seen


async def test_the_keys_are_nowhere_in_the_sandbox(live):
    run, _, _ = live
    result = next(r for r in run["invariant_results"] if r["invariant_id"] == "key_nowhere")
    assert result["status"] == "passed", result


async def test_the_keys_are_not_in_the_trajectory_traces_or_recording(api, live):
    run, _, events = live
    url = urlsplit(run["trajectory_url"])
    response = await api.client.get(f"{url.path}?{url.query}")
    trajectory = await response.read()
    assert response.status == 200, trajectory[:300]
    recording = (api.home / "recordings").rglob("*")
    stored = b"".join(p.read_bytes() for p in recording if p.is_file())
    found = [where for where, data in (("trajectory", trajectory), ("traces", repr(events).encode()), ("recording", stored))
             if OPENAI_KEY.encode() in data or ANTHROPIC_KEY.encode() in data]
    assert (found, len(stored) > 0) == ([], True)


async def test_the_budget_refuses_the_call_past_it_and_errors_the_run(api, image, host_ip, provider):
    provider.script(*turns())
    await upload(api, gateway_spec("gw-budget", image, upstream(provider, host_ip), budget={"max_calls": 2}))
    run = await run_spec(api, spec_id="gw-budget", secrets=SECRETS)
    assert (run["status"], run["reason"], run["models"]["calls"], len(provider.requests)) == ("errored", "budget_exceeded", 2, 2), run


async def test_a_failed_run_replays_with_the_provider_stopped(api, live):
    failed, _, _ = live
    response, queued = await api.post(f"/v1/runs/{failed['id']}/replay", json={"secrets": SECRETS})
    assert response.status == 202, queued
    replayed = await wait_run(api, queued["id"])
    answer = next(r for r in replayed["invariant_results"] if r["invariant_id"] == "answer")
    assert (replayed["status"], replayed["models"]["mode"], replayed["models"]["calls"], answer["evidence"].get("content")) == \
        ("failed", "replayed", 3, "A|B|wrong"), replayed


async def test_a_recorded_run_asked_something_new_diverges(api, live):
    run, _, _ = live
    pins = {"model_recording": run["reproducer"]["pins"]["model_recording"]}
    diverged = await run_spec(api, spec_id="gw-live", secrets=SECRETS, pins=pins, inputs={"q": "something else"})
    assert (diverged["status"], diverged["reason"], "messages" in diverged["error"]["message"]) == \
        ("errored", "replay_diverged", True), diverged


async def test_a_pooled_sandbox_gets_its_gateway_configured_at_claim(image, host_ip, provider):
    """The warm pool boots the gateway's container ahead of any run; the keys, budget and token
    reach it when a run claims the sandbox, and the run's calls go through it."""
    from tests.support.api import start_api, stop_api
    from tests.support.waiting import wait_for

    pooled_api = await start_api(pool_size=1)
    try:
        await upload(pooled_api, gateway_spec("gw-pooled", image, upstream(provider, host_ip)))
        provider.script(*turns())
        await run_spec(pooled_api, spec_id="gw-pooled", secrets=SECRETS)  # asks for the shape: the pool fills

        async def pooled():
            response, body = await pooled_api.get("/v1/health")
            return sum(body["sandbox_pool"]["pooled"].values()) >= 1 or None

        await wait_for(pooled, timeout=120, what="a pooled gateway sandbox", interval=0.2)
        provider.script(*turns())
        run = await run_spec(pooled_api, spec_id="gw-pooled", secrets=SECRETS)
        response, sandbox = await pooled_api.get(f"/v1/sandboxes/{run['sandbox_id']}")
        assert (run["status"], run["models"]["calls"], sandbox["boot"]["pooled"]) == ("passed", 3, True), (run, sandbox)
    finally:
        await stop_api(pooled_api)


async def experiment(api, timeout: float = 240, **body) -> dict:
    from tests.support.waiting import wait_for

    response, created = await api.post("/v1/experiments", json=body)
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run", json={"secrets": SECRETS})
    assert response.status == 202, started

    async def finished():
        response, found = await api.get(f"/v1/experiments/{created['id']}")
        return found if found["status"] in ("completed", "failed", "cancelled") else None

    return await wait_for(finished, timeout=timeout, what=f"experiment {created['id']}", interval=0.2)


def replicas(results: dict) -> list[dict]:
    return [r for scenario in results["scenarios"] for r in scenario["runs"]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def recorded_experiment(api, image, host_ip):
    """A one-replica experiment of a gateway spec, live; the provider is stopped afterwards."""
    with ProviderServer(host="0.0.0.0") as provider:
        provider.script(*turns(last="wrong"))
        await upload(api, gateway_spec("gw-exp", image, upstream(provider, host_ip)))
        return await experiment(api, spec_id="gw-exp", replicas=1)


async def test_an_experiment_replays_another_experiments_model_answers(api, recorded_experiment):
    replayed = await experiment(api, spec_id="gw-exp", replicas=1, replay_models_from=recorded_experiment["id"])
    [before], [after] = replicas(recorded_experiment), replicas(replayed)
    response, run = await api.get(f"/v1/runs/{after['run_id']}")
    assert (before["status"], after["status"], run["models"]["mode"]) == ("failed", "failed", "replayed"), (before, after, run)


async def test_an_experiments_budget_overrides_the_specs(api, recorded_experiment):
    limited = await experiment(api, spec_id="gw-exp", replicas=1, replay_models_from=recorded_experiment["id"],
                               models_budget={"max_calls": 2})
    [replica] = replicas(limited)
    assert (replica["status"], replica["reason"]) == ("errored", "budget_exceeded"), replica


async def test_an_agent_that_gives_up_on_a_failing_provider_is_an_infrastructure_error(api, image, host_ip, provider):
    provider.respond = lambda request: Turn(status=503)
    await upload(api, gateway_spec("gw-provider-down", image, upstream(provider, host_ip)))
    run = await run_spec(api, spec_id="gw-provider-down", secrets=SECRETS)
    assert (run["status"], run["reason"]) == ("errored", "provider_error"), run
