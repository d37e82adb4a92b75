"""The swarm fixture's pieces: bring the local swarm up (swarm/cluster.py, idempotent), read its
settings, and clean up what a test left on it by label."""
from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import uuid
from pathlib import Path

import docker

from daemon.sandbox.engine import ContainerSpec
from daemon.sandbox.engine.swarm.settings import SwarmSettings, from_env, read_env_file

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / ".svc-home" / "swarm.env"
PYTHON = "localhost/svc/python:3.11"
POSTGRES = "localhost/svc/postgres:15"


def swarm_up() -> SwarmSettings:
    """The local swarm's settings, starting it first when needed; RuntimeError with the cause when it
    does not come up (the caller fails, never skips)."""
    p = subprocess.run([sys.executable, str(ROOT / "swarm" / "cluster.py"), "up"], stderr=subprocess.PIPE, text=True)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise RuntimeError(" | ".join(p.stderr.strip().splitlines()[-3:]) or f"exit status {p.returncode}")
    return from_env(read_env_file(ENV_FILE.read_text()))


def test_label() -> dict[str, str]:
    """Labels marking what one test creates (so its cleanup finds exactly that)."""
    return {"svc.daemon": f"swarmtest-{uuid.uuid4().hex[:8]}"}


def service_spec(name: str, image: str, network: str | None, labels: dict[str, str], *, node: str | None = None,
                 command: list[str] | None = None, **extra) -> ContainerSpec:
    labels = {**labels, **({"svc.place": node} if node else {})}
    return ContainerSpec(name=name, image=image, command=command, network=network, aliases=[name.rsplit("-", 1)[-1]],
                         labels=labels, init=True, **extra)


def remove_labelled(settings: SwarmSettings, labels: dict[str, str]) -> None:
    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    client = settings.api_client(settings.manager, timeout=30)
    try:
        for service in client.services(filters=filters):
            client.remove_service(service["ID"])
        for secret in client.secrets(filters=filters):
            try:
                client.remove_secret(secret["ID"])
            except docker.errors.APIError:
                pass  # still in use by a task being removed
        for network in client.networks(filters=filters):
            try:
                client.remove_network(network["Id"])
            except docker.errors.APIError:
                pass  # its tasks are still detaching; the next swarm-down removes it
    finally:
        client.close()


def labelled_containers(settings: SwarmSettings, labels: dict[str, str]) -> dict[str, list[str]]:
    """Node -> names of containers carrying the labels, on every node that answers."""
    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    out: dict[str, list[str]] = {}
    for node, url in settings.nodes.items():
        client = settings.api_client(url, timeout=5)
        try:
            names = [c["Names"][0] for c in client.containers(all=True, filters=filters)]
        finally:
            client.close()
        if names:
            out[node] = names
    return out



def node_back(settings: SwarmSettings, node: str) -> bool:
    """The node's engine answers and the manager sees the node ready."""
    try:
        engine = settings.api_client(settings.nodes[node], timeout=5)
        engine.close()
        manager = settings.api_client(settings.manager, timeout=5)
        try:
            return any(n["Description"]["Hostname"] == node and n["Status"]["State"] == "ready" for n in manager.nodes())
        finally:
            manager.close()
    except docker.errors.DockerException:
        return False


def daemon_overrides(settings: SwarmSettings) -> dict[str, str]:
    """`start_api` settings for a daemon whose sandboxes run on this swarm."""
    return {"engine": "swarm", "swarm_manager": settings.manager,
            "swarm_nodes": ",".join(f"{k}={v}" for k, v in settings.nodes.items()),
            "swarm_images": ",".join(f"{k}={v}" for k, v in settings.images.items()),
            "swarm_cert_path": settings.cert_path}


def daemon_env(settings: SwarmSettings) -> dict[str, str]:
    """The same settings as environment variables, for a real `svcd` process."""
    return {f"SERVICE_{key.upper()}": value for key, value in daemon_overrides(settings).items()}


def node_endpoints(settings: SwarmSettings) -> list[str]:
    """Each node's engine as host:port (where its API listens)."""
    return sorted({url.split("//")[1] for url in settings.nodes.values()})


def cluster_resources(settings: SwarmSettings) -> tuple[int, int]:
    """CPUs and memory bytes of every node, summed, as each node's engine reports them."""
    cpus = memory = 0
    for url in settings.nodes.values():
        client = settings.api_client(url, timeout=10)
        try:
            info = client.info()
        finally:
            client.close()
        cpus += int(info["NCPU"])
        memory += int(info["MemTotal"])
    return cpus, memory


def bridge_gateway(network: str = "svc-swarm") -> str:
    """This machine's address on a bridge network of its engine (on `svc-swarm`: what a node reaches
    this host by; on `bridge`: docker0's address, there as long as the engine runs)."""
    p = subprocess.run(["docker", "network", "inspect", "--format", "{{json (index .IPAM.Config 0)}}", network],
                       capture_output=True, text=True, check=True)
    config = json.loads(p.stdout)
    # the engine gives a bridge the first address of its subnet when none was asked for
    return config.get("Gateway") or str(ipaddress.ip_network(config["Subnet"]).network_address + 1)
