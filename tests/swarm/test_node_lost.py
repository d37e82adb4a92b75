"""A node killed under a running sandbox: calls end in seconds naming the node, and reaping from
the manager leaves nothing on that node once it is back. Restarts the node it kills."""
from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest

from daemon.sandbox.engine.swarm.driver import NodeLost
from tests.support.swarm import PYTHON, labelled_containers, node_back, service_spec
from tests.support.waiting import wait_for, wait_for_sync


@pytest.fixture
def killed_node(swarm):
    """The worker node to kill; restarted (and back in the swarm) after the test."""
    node = list(swarm.nodes)[1]
    yield node
    subprocess.run(["docker", "start", node], check=True, capture_output=True)
    wait_for_sync(lambda: node_back(swarm, node), timeout=60, what=f"{node} back in the swarm")


async def test_exec_on_a_killed_node_names_the_node(swarm, driver, labels, killed_node):
    agent = await driver.run_container(service_spec(f"svct-{uuid.uuid4().hex[:8]}-agent", PYTHON, None, labels,
                                                    node=killed_node, command=["sleep", "infinity"]))
    subprocess.run(["docker", "kill", killed_node], check=True, capture_output=True)
    with pytest.raises(NodeLost, match=killed_node):
        await driver.exec(agent.id, ["true"], watchdog_s=10)


async def test_reaped_sandbox_is_gone_from_the_killed_node_once_it_is_back(swarm, driver, labels, killed_node):
    await driver.run_container(service_spec(f"svct-{uuid.uuid4().hex[:8]}-agent", PYTHON, None, labels,
                                            node=killed_node, command=["sleep", "infinity"]))
    subprocess.run(["docker", "kill", killed_node], check=True, capture_output=True)
    services, _ = await driver.list_labelled(labels)
    for service in services:
        await driver.remove_container(service["Id"])
    subprocess.run(["docker", "start", killed_node], check=True, capture_output=True)
    await wait_for(lambda: node_back(swarm, killed_node), timeout=60, what=f"{killed_node} back in the swarm")
    await wait_for(lambda: labelled_containers(swarm, labels) == {}, timeout=30, what="the orphaned task removed")
    assert labelled_containers(swarm, labels) == {}


async def test_scheduler_limit_follows_a_killed_node_without_a_restart(swarm, killed_node):
    from daemon.runner.engine import Scheduler
    from daemon.sandbox.engine.swarm.driver import SwarmDriver

    driver = SwarmDriver(swarm, capacity_refresh_s=0.5)
    try:
        before = await asyncio.to_thread(driver.concurrency, 1, 64)
        scheduler = Scheduler(lambda job, cancel: asyncio.sleep(0), before)
        driver.follow_capacity(before, 64, scheduler.set_limit)
        subprocess.run(["docker", "kill", killed_node], check=True, capture_output=True)
        await wait_for(lambda: scheduler.limit < before, timeout=60, what=f"the limit below {before} without {killed_node}")
        nodes = len(swarm.nodes)  # alike: each node is this machine seen from a container
        assert scheduler.limit == before * (nodes - 1) // nodes
    finally:
        await driver.close()
