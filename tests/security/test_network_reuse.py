"""A sandbox network is reused by the next sandbox (daemon/sandbox/network_pool.py), possibly another
tenant's: nothing of the last sandbox may be reachable on it. Real engine, real daemon app.

- a server the first tenant's agent left running in the background is gone with its container: the
  second tenant, on the same network, cannot connect to that address or resolve its names;
- a container the teardown did not remove (here one svc never created, attached to the network from
  outside) keeps the network out of the pool: the next sandbox gets another network and cannot reach
  it. Without the pool's empty-network check it would join that container's network."""
from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.support.api import start_api, stop_api
from tests.support.engine import sandbox_network
from tests.support.images import PYTHON

pytestmark = pytest.mark.asyncio

CONNECT = ("import socket, sys\ns = socket.socket(); s.settimeout(2)\n"
           "try:\n    s.connect((sys.argv[1], 8000)); print('CONNECTED')\nexcept OSError as e:\n    print('FAILED', e)\n")


async def sandbox(api, key: str | None = None) -> dict:
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON}, key=key)
    assert response.status == 201, body
    for _ in range(300):
        response, body = await api.get(f"/v1/sandboxes/{body['id']}", key=key)
        if body["state"] != "creating":
            break
        await asyncio.sleep(0.1)
    assert body["state"] == "ready", body
    return body


async def run(api, sandbox_id: str, command: list[str] | str, key: str | None = None, **extra) -> dict:
    response, body = await api.post(f"/v1/sandboxes/{sandbox_id}/commands", json={"command": command, **extra}, key=key)
    assert response.status == 200, body
    return body


async def tenant_key(api) -> str:
    response, body = await api.post("/v1/tenants", json={"name": "next-tenant"})
    assert response.status == 201, body
    return body["key"]["secret"]


async def test_the_next_tenant_on_a_reused_network_reaches_nothing_of_the_last(docker_client, stock_images):
    api = await start_api(pool_size=0)  # no warm sandbox takes the network in between
    try:
        first = await sandbox(api)
        await run(api, first["id"], "python3 -m http.server 8000 >/dev/null 2>&1", background=True)
        network = sandbox_network(docker_client, first["id"])
        agent = docker_client.containers.get(f"svc-{first['id']}-agent")
        address = agent.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        for _ in range(50):  # the server answers inside the first sandbox
            if "CONNECTED" in (await run(api, first["id"], ["python3", "-c", CONNECT, "127.0.0.1"]))["stdout"]:
                break
            await asyncio.sleep(0.2)
        response, _ = await api.delete(f"/v1/sandboxes/{first['id']}")
        assert response.status == 204
        key = await tenant_key(api)
        second = await sandbox(api, key)
        same = sandbox_network(docker_client, second["id"]).name == network.name
        probe = (await run(api, second["id"], ["python3", "-c", CONNECT, address], key))["stdout"]
        names = await run(api, second["id"], f"getent hosts svc-{first['id']}-agent sandbox-{first['id']}", key)
    finally:
        await stop_api(api)
    assert (same, probe.split()[0], names["exit_code"] != 0) == (True, "FAILED", True), (probe, names)


async def test_a_network_with_a_container_left_on_it_is_not_reused(docker_client, stock_images):
    api = await start_api(pool_size=0)
    stranger = network = None
    try:
        first = await sandbox(api)
        network = sandbox_network(docker_client, first["id"])
        # not svc's: the teardown does not know it, as a container whose removal failed would stay
        stranger = docker_client.containers.run(PYTHON, ["python3", "-m", "http.server", "8000"], detach=True,
                                                network=network.name, labels={"svc.test": "1"})
        stranger.reload()
        address = stranger.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        response, _ = await api.delete(f"/v1/sandboxes/{first['id']}")
        assert response.status == 204
        key = await tenant_key(api)
        second = await sandbox(api, key)
        other = sandbox_network(docker_client, second["id"]).name != network.name
        probe = (await run(api, second["id"], ["python3", "-c", CONNECT, address], key))["stdout"]
    finally:
        if stranger is not None:
            with contextlib.suppress(Exception):
                stranger.remove(force=True)
        if network is not None:
            with contextlib.suppress(Exception):
                docker_client.networks.get(network.name).remove()
        await stop_api(api)
    assert (other, probe.split()[0]) == (True, "FAILED"), probe
