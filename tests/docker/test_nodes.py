"""Where sandboxes run, on the local engine: a sandbox names its node (`local`), and `GET /v1/nodes`
lists that node with what the live sandboxes reserve there and which of the caller's run on it.
Another tenant sees neither the sandbox nor its reservation. (The swarm's nodes: tests/swarm/test_placement.py.)"""
from __future__ import annotations

import os

import pytest
import pytest_asyncio

from tests.support.images import PYTHON


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api):
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON})
    assert response.status == 201, body
    ready = await api.wait_state(body["id"])
    assert ready["status"] == "ready", ready
    yield ready
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_a_sandbox_names_the_node_it_runs_on(api, sandbox):
    assert sandbox["node"] == "local"


async def test_the_local_node_lists_the_callers_sandbox_and_its_reservation(api, sandbox):
    response, body = await api.get("/v1/nodes")
    assert response.status == 200, body
    [node] = body["nodes"]
    assert (body["runtime"], node["name"], node["state"], node["cpus"], sandbox["id"] in node["sandboxes"],
            node["reserved_cpus"] >= 1) == ("docker", "local", "ready", float(os.cpu_count() or 1), True, True)


async def test_another_tenant_sees_neither_the_sandbox_nor_its_reservation(api, sandbox):
    response, tenant = await api.post("/v1/tenants", json={"name": "nodes-intruder"})
    assert response.status == 201, tenant
    response, body = await api.get("/v1/nodes", key=tenant["key"]["secret"])
    [node] = body["nodes"]
    assert (node["sandboxes"], node["live_sandboxes"], node["reserved_cpus"]) == ([], 0, 0.0)
