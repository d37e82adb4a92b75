"""The swarm driver on a real 2-node swarm: placement across nodes, failures that name the node and
cause and leave nothing behind, isolation from the nodes, the workspace through the archive API."""
from __future__ import annotations

import io
import tarfile
import uuid

import pytest

from daemon.sandbox.engine import ImageUnavailable
from daemon.sandbox.engine.swarm.driver import SwarmTaskFailed
from tests.support.swarm import POSTGRES, PYTHON, labelled_containers, node_endpoints, service_spec


def _name(role: str) -> str:
    return f"svct-{uuid.uuid4().hex[:8]}-{role}"


async def _network(driver, labels) -> str:
    name = _name("net")
    await driver.create_network(name, labels, internal=True)
    return name


async def test_agent_reaches_its_database_on_another_node(swarm, driver, labels):
    first, second = list(swarm.nodes)[:2]
    net = await _network(driver, labels)
    db = service_spec(_name("db"), POSTGRES, net, labels, node=second, env={"POSTGRES_PASSWORD": "pw"})
    db.aliases = ["db"]
    agent = service_spec(_name("agent"), PYTHON, net, labels, node=first, command=["sleep", "infinity"])
    agent_info = await driver.run_container(agent)
    await driver.run_container(db)
    probe = "for i in $(seq 60); do pg_isready -q -h db && break; sleep 0.5; done; PGPASSWORD=pw psql -h db -U postgres -tAc 'select 41+1'"
    result = await driver.exec(agent_info.id, ["sh", "-c", probe], watchdog_s=60)
    assert result.stdout.decode().strip() == "42", result.stderr.decode()


async def test_agent_and_database_run_on_the_nodes_asked_for(swarm, driver, labels):
    first, second = list(swarm.nodes)[:2]
    net = await _network(driver, labels)
    agent = await driver.run_container(service_spec(_name("agent"), PYTHON, net, labels, node=first, command=["sleep", "infinity"]))
    db = await driver.run_container(service_spec(_name("db"), POSTGRES, net, labels, node=second, env={"POSTGRES_PASSWORD": "pw"}))
    assert (driver.node_of(agent.id), driver.node_of(db.id)) == (first, second)


async def test_image_missing_from_the_registry_is_refused_before_any_service(driver):
    with pytest.raises(ImageUnavailable, match="not in the swarm's registry"):
        await driver.ensure_image("localhost/svc/nothing:1")


async def test_missing_digest_ends_with_the_node_and_cause_and_leaves_nothing(swarm, driver, labels):
    missing = "svc-swarm-registry:5000/svc/python@sha256:" + "0" * 64
    spec = service_spec(_name("agent"), missing, None, labels, command=["true"])
    with pytest.raises(SwarmTaskFailed) as failure:
        await driver.run_container(spec)
    assert "on node svc-swarm-" in str(failure.value) and (await driver.list_labelled(labels))[0] == []


async def test_unplaceable_task_ends_naming_the_cause_and_leaves_nothing(driver, labels):
    spec = service_spec(_name("agent"), PYTHON, None, labels, node="no-such-node", command=["sleep", "infinity"])
    with pytest.raises(SwarmTaskFailed, match="no node can run it"):
        await driver.run_container(spec)
    assert (await driver.list_labelled(labels))[0] == []


async def test_no_route_from_a_sandbox_to_any_node(swarm, driver, labels):
    net = await _network(driver, labels)
    agent = await driver.run_container(service_spec(_name("agent"), PYTHON, net, labels, command=["sleep", "infinity"]))
    engines = [endpoint.rsplit(":", 1) for endpoint in node_endpoints(swarm)]
    script = "; ".join(f"nc -z -w 2 {h} {port} && echo reached {h}" for h, port in engines) + "; true"
    result = await driver.exec(agent.id, ["sh", "-c", script], watchdog_s=30)
    assert result.stdout.decode() == ""


async def test_workspace_round_trips_through_the_archive_api(driver, labels):
    agent = await driver.run_container(service_spec(_name("agent"), PYTHON, None, labels, command=["sleep", "infinity"],
                                                    working_dir="/workspace"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"hello\n"
        info = tarfile.TarInfo("notes.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    await driver.put_archive(agent.id, "/workspace", buf.getvalue())
    await driver.exec(agent.id, ["sh", "-c", "echo edited >> /workspace/notes.txt"], watchdog_s=10)
    assert await driver.read_file(agent.id, "/workspace/notes.txt") == b"hello\nedited\n"


async def test_capacity_sums_every_node(swarm, driver):
    assert (await driver.capacity())["nodes"] == len(swarm.nodes)


async def test_removed_sandbox_leaves_no_container_on_any_node(swarm, driver, labels):
    first, second = list(swarm.nodes)[:2]
    net = await _network(driver, labels)
    a = await driver.run_container(service_spec(_name("agent"), PYTHON, net, labels, node=first, command=["sleep", "infinity"]))
    b = await driver.run_container(service_spec(_name("db"), PYTHON, net, labels, node=second, command=["sleep", "infinity"]))
    await driver.remove_container(a.id)
    await driver.remove_container(b.id)
    from tests.support.waiting import wait_for

    await wait_for(lambda: labelled_containers(swarm, labels) == {}, timeout=20, what="task containers removed")
    assert labelled_containers(swarm, labels) == {}


async def test_secret_is_a_file_in_the_container(driver, labels):
    agent = await driver.run_container(service_spec(_name("agent"), PYTHON, None, labels, command=["sleep", "infinity"]),
                                       secrets={"API_KEY": b"s3cret-value"})
    result = await driver.exec(agent.id, ["cat", "/run/secrets/API_KEY"], watchdog_s=10)
    assert result.stdout == b"s3cret-value"


async def test_secrets_are_removed_with_their_container(swarm, driver, labels):
    agent = await driver.run_container(service_spec(_name("agent"), PYTHON, None, labels, command=["sleep", "infinity"]),
                                       secrets={"API_KEY": b"s3cret-value"})
    await driver.remove_container(agent.id)
    assert driver.api.secrets(filters={"label": f"svc.daemon={labels['svc.daemon']}"}) == []


async def test_reaping_finds_a_secret_whose_service_is_gone(swarm, driver, labels):
    driver.api.create_secret(_name("agent") + "-TOKEN", b"orphan", labels={**labels, "svc.secret-of": "gone"})
    containers, _ = await driver.list_labelled(labels)
    for entry in containers:
        await driver.remove_container(entry["Id"])
    assert driver.api.secrets(filters={"label": f"svc.daemon={labels['svc.daemon']}"}) == []
