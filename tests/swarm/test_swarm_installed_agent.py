"""An installed agent on the swarm: Claude Code's layer is built on svcd's own engine (as locally; reused
by its digest when a local test built it already), pushed to the swarm's registry and pulled by digest
on the node that runs the sandbox; the agent talks to a fake provider this test starts on this
machine's address on the swarm's bridge, only through the sandbox's model gateway on the swarm, and
solves the small task."""
from __future__ import annotations

import os

import pytest
import pytest_asyncio

from tests.support.installed_agents import AGENTS, KEY, agent_spec, wait_ended
from tests.support.api import start_api, stop_api
from tests.support.provider_server import ProviderServer
from tests.support.runs import start_run, upload
from tests.support.swarm import bridge_gateway, daemon_overrides

pytestmark = pytest.mark.asyncio(loop_scope="module")

NAME = "claude-code"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(swarm):
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    try:
        instance = await start_api(**daemon_overrides(swarm))
        yield instance
        await stop_api(instance)
    finally:
        del os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"]


async def test_claude_code_solves_the_task_on_the_swarm_through_the_gateway(api, swarm):
    version, _, _, model = AGENTS[NAME]
    with ProviderServer(host=bridge_gateway("svc-swarm")) as provider:
        provider.respond = model("hello")
        await upload(api, agent_spec(NAME, "hello", provider.url))
        queued = await start_run(api, f"installed-{NAME}-hello", secrets={"PROVIDER_KEY": KEY})
        run = await wait_ended(api, queued["id"])
        requests = list(provider.requests)
    layer = (run["agent"] or {}).get("layer", "")
    pushed = api.manager.driver._published.get(layer, "")
    hello = {r["invariant_id"]: r["status"] for r in run["invariant_results"]}.get("hello")
    assert (run["status"], hello, run["agent"]["version"], run["models"]["calls"] > 0) == \
        ("passed", "passed", version, True), (run, requests[-3:])
    assert pushed.startswith(f"{swarm.registry}/svc-agent/{NAME}@sha256:"), (layer, pushed)
