"""Reaping is complete: what no sandbox owns goes without waiting for a restart.

- The periodic sweep (SERVICE_REAP_INTERVAL) removes this daemon's containers, networks and volumes
  whose sandbox is gone once they are older than the grace (SERVICE_REAP_GRACE), and the host
  directories of such sandboxes; it spares a live sandbox's objects, objects younger than the grace
  and another daemon's objects.
- A VOLUME an image declares becomes a named volume labelled with the sandbox and the daemon (an
  anonymous one carries no label, so nothing could find it after a crash), removed with the sandbox.
"""
from __future__ import annotations

import asyncio
import io
import os
import sqlite3
import time

import docker
import pytest

from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.waiting import wait_for

GRACE_S = 3.0


@pytest.fixture
async def api(stock_images):
    instance = await start_api(reap_interval_s=0.5, reap_grace_s=GRACE_S)
    yield instance
    await stop_api(instance)


def plant(client: docker.APIClient, labels: dict[str, str], name: str) -> dict[str, str]:
    """A stopped container, a network and a volume with `labels`, as an engine restart leaves them."""
    container = client.create_container(PYTHON, command=["true"], labels=labels, name=name)["Id"]
    network = client.create_network(name, labels=labels, internal=True)["Id"]
    volume = client.create_volume(name=name, labels=labels)["Name"]
    return {"container": container, "network": network, "volume": volume}


def present(client: docker.APIClient, objects: dict[str, str]) -> set[str]:
    left = set()
    if client.containers(all=True, filters={"id": objects["container"]}):
        left.add("container")
    if client.networks(ids=[objects["network"]]):
        left.add("network")
    if any(v["Name"] == objects["volume"] for v in client.volumes().get("Volumes") or []):
        left.add("volume")
    return left


def remove(client: docker.APIClient, objects: dict[str, str]) -> None:
    for call, key in ((client.remove_container, "container"), (client.remove_network, "network"),
                      (client.remove_volume, "volume")):
        try:
            call(objects[key], **({"force": True} if key != "network" else {}))
        except docker.errors.NotFound:
            pass


async def test_the_sweep_removes_what_no_sandbox_owns_and_spares_the_rest(api, docker_client):
    client = docker_client.api
    daemon_id = api.manager.settings.daemon_id
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON})
    assert response.status == 201, body
    live = await api.wait_state(body["id"])
    assert live["status"] == "ready", live
    suffix = os.urandom(3).hex()
    orphan = plant(client, {"svc.daemon": daemon_id, "svc.sandbox": "sbx_gone" + suffix, "svc.role": "agent"},
                   "svc-orphan-" + suffix)
    foreign = plant(client, {"svc.daemon": "other" + suffix, "svc.sandbox": "sbx_other" + suffix}, "svc-foreign-" + suffix)
    runtime_dir = api.manager.runtime_root / ("sbx_gone" + suffix)
    runtime_dir.mkdir(parents=True)
    try:
        planted = time.monotonic()
        await asyncio.sleep(GRACE_S - 1.5)  # several sweeps ran: the orphan is younger than the grace
        assert present(client, orphan) == {"container", "network", "volume"}
        assert runtime_dir.exists()

        async def swept():
            return not await asyncio.to_thread(present, client, orphan) and not runtime_dir.exists()

        await wait_for(swept, timeout=30, what="the sweep to remove the orphaned objects", interval=0.3)
        assert time.monotonic() - planted >= GRACE_S - 1.5
        assert present(client, foreign) == {"container", "network", "volume"}  # another daemon's
        mine = client.containers(all=True, filters={"label": f"svc.sandbox={live['id']}"})
        assert mine and all(c["State"] == "running" for c in mine)  # the live sandbox's
        assert (await api.run(live["id"], "true"))["exit_code"] == 0
    finally:
        remove(client, orphan)
        remove(client, foreign)
        await api.delete(f"/v1/sandboxes/{live['id']}")


async def test_an_image_volume_is_a_labelled_named_volume_removed_with_its_sandbox(api, docker_client):
    tag = "localhost/svc-test/with-volume:1"
    dockerfile = f"FROM {PYTHON}\nVOLUME /data\n".encode()
    await asyncio.to_thread(lambda: list(docker_client.api.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True)))
    daemon_id = api.manager.settings.daemon_id
    response, body = await api.post("/v1/sandboxes", json={"image": tag})
    assert response.status == 201, body
    sandbox = await api.wait_state(body["id"])
    assert sandbox["status"] == "ready", sandbox
    [agent] = docker_client.api.containers(filters={"label": [f"svc.sandbox={sandbox['id']}", "svc.role=agent"]})
    [mount] = [m for m in agent["Mounts"] if m["Destination"] == "/data"]
    volumes = docker_client.api.volumes(filters={"label": f"svc.sandbox={sandbox['id']}"}).get("Volumes") or []
    assert [v["Name"] for v in volumes] == [mount["Name"]]
    assert volumes[0]["Labels"]["svc.daemon"] == daemon_id
    await api.delete(f"/v1/sandboxes/{sandbox['id']}")
    await wait_for(lambda: api.manager.runtime(sandbox["id"]) is None, timeout=30, what="the sandbox gone")
    left = docker_client.api.volumes(filters={"label": f"svc.sandbox={sandbox['id']}"}).get("Volumes") or []
    assert left == []


def test_doctor_lists_a_gone_daemons_leftovers_and_fix_removes_them(docker_client, tmp_path):
    from tests.support.cli import cli_environ, free_port, run_cli

    client = docker_client.api
    suffix = os.urandom(3).hex()
    dead = plant(client, {"svc.daemon": "dmn_gone" + suffix, "svc.sandbox": "sb-gone" + suffix}, "svc-gone-" + suffix)
    # this home's daemon, killed: its store names it, no daemon answers (a gone daemon of another
    # home would be spared for GRACE_S after its last object's creation)
    with sqlite3.connect(tmp_path / "svc.db") as db:
        db.execute("CREATE TABLE daemon_meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO daemon_meta VALUES ('daemon_id', ?)", ("dmn_gone" + suffix,))
    env = cli_environ(f"http://127.0.0.1:{free_port()}", None, tmp_path)
    try:
        listed = run_cli(env, "doctor")
        line = next(x for x in listed.stderr.splitlines() if "leftovers:" in x)
        assert line.startswith("warn") and "dmn_gone" + suffix in line and "svc doctor --fix" in line, listed.stderr
        assert present(client, dead) == {"container", "network", "volume"}  # listing removes nothing
        fixed = run_cli(env, "doctor", "--fix")
        line = next(x for x in fixed.stderr.splitlines() if "leftovers:" in x)
        assert "removed" in line and "dmn_gone" + suffix in line, fixed.stderr
        assert present(client, dead) == set()
    finally:
        remove(client, dead)
