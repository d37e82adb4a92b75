"""Where sandboxes run on the two-node swarm (daemon/sandbox/engine/swarm/placement.py): every
container of a sandbox on one node, that node the one with the most CPU and memory left (not the
one running the fewest tasks, Swarm's own choice), named by the sandbox and by `GET /v1/nodes`;
and a node lost under a running agent is an infrastructure error retried on the other node."""
from __future__ import annotations

import asyncio
import subprocess

import pytest

from daemon.experiments import service as experiment_service
from tests.support.specs import spec, tiny_spec
from tests.support.swarm import node_back
from tests.support.waiting import wait_for, wait_for_sync

pytestmark = pytest.mark.asyncio(loop_scope="module")


def sandbox_spec(name: str, cpus: float, services: list[dict] | None = None) -> dict:
    return spec(name, resources={"cpus": cpus, "timeout": "10m"}, **({"services": services} if services else {}))


async def nodes_of(api, sandbox_id: str) -> set[str]:
    """The hostnames of the nodes running the sandbox's containers, as the manager places them."""
    driver = api.manager.driver

    def read() -> set[str]:
        found = set()
        for service in driver.api.services(filters={"label": f"svc.sandbox={sandbox_id}"}):
            for task in driver.api.tasks(filters={"service": service["ID"], "desired-state": "running"}):
                found.add(driver.api.inspect_node(task["NodeID"])["Description"]["Hostname"])
        return found

    return await asyncio.to_thread(read)


async def ready_sandbox(api, doc: dict) -> dict:
    body = await api.create_from_spec(doc)
    body = await api.wait_state(body["id"], ("ready", "error", "stopped"), timeout=120)
    assert body["status"] == "ready", body
    return body


async def test_a_sandboxs_containers_share_the_node_the_api_names(api):
    body = await ready_sandbox(api, sandbox_spec("place-together", 0.5, [{"name": "cache", "type": "redis"}]))
    try:
        assert await nodes_of(api, body["id"]) == {body["node"]}
    finally:
        await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_a_sandbox_goes_to_the_node_with_the_most_cpu_left_and_nodes_list_it(api):
    """big (1.5 CPUs) fills one node; small (0.25 CPU and two services: three tasks) goes to the other;
    the third (0.5 CPU) fits on both, and Swarm's spread would pick big's node (fewer tasks there)."""
    big = await ready_sandbox(api, sandbox_spec("place-big", 1.5))
    small = await ready_sandbox(api, sandbox_spec("place-small", 0.25, [{"name": "cache", "type": "redis"},
                                                                        {"name": "queue", "type": "redis"}]))
    third = await ready_sandbox(api, sandbox_spec("place-third", 0.5))
    try:
        response, listed = await api.get("/v1/nodes")
        assert response.status == 200, listed
        nodes = {n["name"]: n for n in listed["nodes"]}
        assert (small["node"] != big["node"], third["node"], sorted(nodes[third["node"]]["sandboxes"]),
                nodes[big["node"]]["reserved_cpus"]) == (True, small["node"], sorted([small["id"], third["id"]]), 1.5)
    finally:
        for sandbox in (big, small, third):
            await api.delete(f"/v1/sandboxes/{sandbox['id']}")


@pytest.fixture
def restart_after(swarm):
    """Nodes the test kills; each started again (and back in the swarm) afterwards."""
    killed: list[str] = []
    yield killed
    for node in killed:
        subprocess.run(["docker", "start", node], check=True, capture_output=True)
        wait_for_sync(lambda: node_back(swarm, node), timeout=90, what=f"{node} back in the swarm")


async def test_a_node_lost_under_a_running_agent_is_retried_on_the_other_node(api, swarm, restart_after, monkeypatch):
    monkeypatch.setattr(experiment_service, "INFRA_RETRY_S", 1.0)
    worker = list(swarm.nodes)[1]  # the manager's node cannot be killed without losing the swarm
    placement = api.manager.driver.placement
    await api.manager.driver.nodes()  # the placement's view of the nodes, read now
    manager_node = next(n for n in placement.shares() if n.name != worker)
    # the manager's node taken whole, so the run lands on the worker
    placement.reserve("test-filler", "test-filler", manager_node.nano_cpus, 0, {manager_node.name}, force=True)
    try:
        await api.upload_doc(tiny_spec("lost-node", "sleep 15; echo ok > ok.txt", replicas=1, matrix=[{"mode": "good"}]))
        response, created = await api.post("/v1/experiments", json={"name": "lost-node", "spec_id": "lost-node"})
        assert response.status == 201, created
        await api.post(f"/v1/experiments/{created['id']}/run")

        async def placed_on_worker():
            response, page = await api.get("/v1/sandboxes", params={"status": "ready,running"})
            return [s for s in page["items"] if s.get("node") == worker]

        await wait_for(placed_on_worker, timeout=120, what=f"the run's sandbox on {worker}", interval=0.3)
        await asyncio.sleep(2)  # the agent is running
        restart_after.append(worker)
        subprocess.run(["docker", "kill", worker], check=True, capture_output=True)
    finally:
        placement.release("test-filler")

    async def finished():
        response, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None

    results = await wait_for(finished, timeout=300, what="the experiment to finish", interval=0.5)
    [scenario] = results["scenarios"]
    [replica] = scenario["runs"]
    _, last = await api.get(f"/v1/runs/{replica['run_id']}")
    _, sandbox = await api.get(f"/v1/sandboxes/{last['sandbox_id']}")
    assert (scenario["verdict"], scenario["retried_runs"], sandbox["node"]) == ("pass", 1, manager_node.name), scenario
