"""The model gateway on the swarm: a spec with `models:` runs with its gateway as one more service of
the sandbox's set, beside the agent on the swarm's nodes. The provider is a fake speaking the OpenAI
wire format (tests/support/provider_server.py) that this test starts on this machine's address on
the swarm's bridge network (what the nodes reach it by; the operator's private-address switch is
on, as for the egress tests): no traffic leaves the machine.

What a user sees: the run is scored on the models' answers, each call is an `llm_call` in the run's
trace, the budget stops the call past it, and the recorded run replays with the provider stopped.
The attack side: whoever reads the swarm (`docker service inspect`, the tasks' containers on the
nodes, the secrets, the gateway's logs) or runs as the agent finds no provider key."""
from __future__ import annotations

import json
import os

import pytest
import pytest_asyncio

from tests.support.api import start_api, stop_api
from tests.support.provider_server import ProviderServer, Turn
from tests.support.runs import inv, run_spec, upload, wait_run
from tests.support.swarm import PYTHON, bridge_gateway, daemon_overrides

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPENAI_KEY = "sk-swarmtest-openai-7c1e0b9d4f2a6e3b"
SECRETS = {"OPENAI_KEY": OPENAI_KEY}

# Two chat completions with nothing but the standard library (the stock image is in the swarm's
# registry); the answers end up in out.txt.
AGENT = r'''
import json, os, urllib.request
def ask(q):
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": q}]}).encode()
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as answer:
        return json.load(answer)["choices"][0]["message"]["content"]
open("/workspace/out.txt", "w").write(ask(os.environ["SERVICE_TASK_PROMPT"]) + "|" + ask("and?"))
'''

KEY_NOWHERE = f"! grep -rqsF -e {OPENAI_KEY} /proc/[0-9]*/environ /workspace /etc /tmp /root"


def gateway_spec(spec_id: str, base: str, *, expect: str = "A|B", budget: dict | None = None) -> dict:
    return {
        "version": 1, "id": spec_id, "base": PYTHON, "task": {"prompt": "answer {{ q }}", "inputs": {"q": "this"}},
        "agent": {"type": "cli", "binary": "python3", "args": ["-c", AGENT], "timeout": "60s"},
        "secrets": {"OPENAI_KEY": "env"},
        "models": {"providers": {"openai": {"key": "OPENAI_KEY", "base_url": f"{base}/v1"}},
                   **({"budget": budget} if budget else {})},
        "invariants": {
            "answer": inv({"type": "file_content", "path": "out.txt", "equals": expect}),
            "key_nowhere": inv({"type": "command_exit", "command": KEY_NOWHERE, "expect_exit_code": 0}),
        },
        "resources": {"timeout": "3m"},
    }


@pytest.fixture(scope="module")
def host_ip(swarm) -> str:
    return bridge_gateway("svc-swarm")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(swarm):
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    try:
        instance = await start_api(**daemon_overrides(swarm))
        yield instance
        await stop_api(instance)
    finally:
        del os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(api, host_ip):
    """One live run whose model gets the second answer wrong (a failure to replay): (run, provider
    requests, trace events). The provider is stopped when the fixture returns."""
    with ProviderServer(host=host_ip) as provider:
        provider.script(Turn(text="A", input_tokens=100, output_tokens=20), Turn(text="wrong", input_tokens=50, output_tokens=10))
        await upload(api, gateway_spec("swarm-gw-live", provider.url))
        run = await run_spec(api, spec_id="swarm-gw-live", secrets=SECRETS)
        requests = list(provider.requests)
    response, page = await api.get(f"/v1/traces?run_id={run['id']}&limit=100")
    assert response.status == 200, page
    return run, requests, page["items"]


def verdicts(run: dict) -> dict:
    return {r["invariant_id"]: r["status"] for r in run["invariant_results"]}


async def test_a_live_run_on_the_swarm_is_scored_on_the_models_answers(live):
    run, requests, _ = live
    assert (run["status"], verdicts(run), run["models"]["mode"], run["models"]["calls"]) == \
        ("failed", {"answer": "failed", "key_nowhere": "passed"}, "live", 2), run
    assert {r["headers"].get("Authorization") for r in requests} == {f"Bearer {OPENAI_KEY}"}


async def test_each_call_on_a_node_is_an_llm_call_in_the_daemons_trace(live):
    run, _, events = live
    calls = sorted((e["cost"]["model"], e["cost"]["input_tokens"], e["cost"]["output_tokens"])
                   for e in events if e["event_type"] == "llm_call")
    assert calls == [("gpt-4o-mini", 50, 10), ("gpt-4o-mini", 100, 20)], events
    assert run["models"]["cost_usd"] > 0, run["models"]


async def test_the_recorded_run_replays_on_the_swarm_with_the_provider_stopped(api, live):
    failed, _, _ = live
    response, queued = await api.post(f"/v1/runs/{failed['id']}/replay", json={})  # and without the key
    assert response.status == 202, queued
    replayed = await wait_run(api, queued["id"], timeout=180)
    answer = next(r for r in replayed["invariant_results"] if r["invariant_id"] == "answer")
    assert (replayed["status"], replayed["models"]["mode"], replayed["models"]["calls"], answer["evidence"].get("content")) == \
        ("failed", "replayed", 2, "A|wrong"), replayed


async def test_the_budget_refuses_the_call_past_it_on_the_swarm(api, host_ip):
    with ProviderServer(host=host_ip) as provider:
        provider.script(Turn(text="A"), Turn(text="B"))
        await upload(api, gateway_spec("swarm-gw-budget", provider.url, budget={"max_calls": 1}))
        run = await run_spec(api, spec_id="swarm-gw-budget", secrets=SECRETS)
        asked = len(provider.requests)
    assert (run["status"], run["reason"], run["models"]["calls"], asked) == ("errored", "budget_exceeded", 1, 1), run


async def test_whoever_reads_the_swarm_finds_no_key(api, swarm, host_ip):
    """Attack: with the manager's API (service, task and secret inspect), each node's engine
    (container inspect, the gateway's logs) and a shell as the agent, look for the key while a
    sandbox with `models:` is up and has called its model."""
    with ProviderServer(host=host_ip) as provider:
        provider.script(Turn(text="A"), Turn(text="B"))
        body = await api.create_from_spec(gateway_spec("swarm-gw-inspect", provider.url), secrets=SECRETS)
        sandbox = (await api.wait_state(body["id"], ("ready", "error"), timeout=120))
        assert sandbox["state"] == "ready", sandbox
        try:
            out = await api.run(sandbox["id"], ["python3", "-c", AGENT], env={"SERVICE_TASK_PROMPT": "this"})
            assert out["exit_code"] == 0, out
            agent = await api.run(sandbox["id"], KEY_NOWHERE)
            seen = read_the_swarm(swarm, sandbox["id"])
        finally:
            await api.delete(f"/v1/sandboxes/{sandbox['id']}")
    assert agent["exit_code"] == 0, agent  # not in the agent's environment or files
    assert {"models", "agent"} <= set(seen["roles"]), seen["roles"]
    assert seen["secrets"] and all(name.endswith("-key-openai") for name in seen["secrets"]), seen["secrets"]
    assert [where for where, text in seen["texts"].items() if OPENAI_KEY in text] == []
    assert len(provider.requests) == 2 and provider.requests[0]["headers"]["Authorization"] == f"Bearer {OPENAI_KEY}"


def read_the_swarm(swarm, sandbox_id: str) -> dict:
    """What the manager's and the nodes' engines show of a sandbox: every text an operator could read."""
    texts: dict[str, str] = {}
    roles: list[str] = []
    secret_names: list[str] = []
    manager = swarm.api_client(swarm.manager, timeout=30)
    try:
        for service in manager.services(filters={"label": f"svc.sandbox={sandbox_id}"}):
            name = service["Spec"]["Name"]
            roles.append(service["Spec"]["Labels"].get("svc.role", ""))
            texts[f"service inspect {name}"] = json.dumps(manager.inspect_service(service["ID"]))
            for task in manager.tasks(filters={"service": service["ID"]}):
                texts[f"task {task['ID']}"] = json.dumps(task)
            for ref in service["Spec"]["TaskTemplate"]["ContainerSpec"].get("Secrets") or []:
                secret_names.append(ref["SecretName"])
                texts[f"secret inspect {ref['SecretName']}"] = json.dumps(manager.inspect_secret(ref["SecretID"]))
    finally:
        manager.close()
    for node, url in swarm.nodes.items():
        engine = swarm.api_client(url, timeout=30)
        try:
            for container in engine.containers(all=True, filters={"label": f"svc.sandbox={sandbox_id}"}):
                texts[f"{node} container inspect {container['Id'][:12]}"] = json.dumps(engine.inspect_container(container["Id"]))
                texts[f"{node} logs {container['Id'][:12]}"] = engine.logs(container["Id"]).decode(errors="replace")
        finally:
            engine.close()
    return {"texts": texts, "roles": roles, "secrets": secret_names}
