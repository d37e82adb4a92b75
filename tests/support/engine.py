"""Checks against the real Docker engine: what a sandbox left behind."""
from __future__ import annotations

import docker.errors


def labelled(docker_client, **labels: str) -> tuple[list, list]:
    """Containers (all states) and networks carrying every given svc.* label. The SDK lists, then
    inspects each container: one removed in between (a run's background teardown) means list again."""
    filters = {"label": [f"svc.{k}={v}" for k, v in labels.items()]}
    while True:
        try:
            return docker_client.containers.list(all=True, filters=filters), docker_client.networks.list(filters=filters)
        except docker.errors.NotFound:
            continue


def assert_released(docker_client, sandbox_id: str) -> None:
    containers, networks = labelled(docker_client, sandbox=sandbox_id)
    assert containers == [] and networks == [], (
        f"sandbox {sandbox_id} left {[c.name for c in containers]} and {[n.name for n in networks]}"
    )


def sandbox_network(docker_client, sandbox_id: str):
    """The sandbox's own network (pooled networks are named for themselves, not the sandbox): the
    one its agent container is on."""
    agent = docker_client.containers.get(f"svc-{sandbox_id}-agent")
    names = [n for n in agent.attrs["NetworkSettings"]["Networks"] if not n.endswith(("-egress", "-models"))]
    assert len(names) == 1, names
    return docker_client.networks.get(names[0])
