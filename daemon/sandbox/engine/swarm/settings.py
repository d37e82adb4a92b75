"""Where the swarm is: the manager's engine, each node's engine, the stock images' digests.

Read from the `NAME=value` lines `make swarm-up` writes to .svc-home/swarm.env (or set by hand
for an existing swarm):

    SERVICE_SWARM_MANAGER=tcp://10.0.0.2:2376            (or ssh://user@host)
    SERVICE_SWARM_NODES=node-1=tcp://10.0.0.2:2376,node-2=ssh://svc@10.0.0.3
    SERVICE_SWARM_CERT_PATH=/path/to/dir                 (ca.pem, cert.pem, key.pem, as DOCKER_CERT_PATH)
    SERVICE_SWARM_SSH_CONFIG=/path/to/ssh_config         (for ssh:// engines: key, known hosts, user, port)
    SERVICE_SWARM_IMAGES=localhost/svc/python:3.11=registry:5000/svc/python@sha256:...,...
    SERVICE_SWARM_REGISTRY=registry:5000                 (where Dockerfile bases are pushed; default:
                                                          the registry of SERVICE_SWARM_IMAGES)

An engine's API is root on its node, so a tcp:// engine is reached only over mutual TLS: svcd checks
the engine's certificate against ca.pem and shows its own (cert.pem, key.pem), for the manager and
every node alike. An ssh:// engine is reached through an `ssh -N -L` tunnel to the node's engine
socket (ssh_tunnel.py), with SERVICE_SWARM_SSH_CONFIG's ssh_config, or the user's own without it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlparse

import docker
from docker.tls import TLSConfig

MAX_NODES = 64
CERT_FILES = ("ca.pem", "cert.pem", "key.pem")
SCHEMES = ("tcp", "ssh", "unix")


class EngineClient(docker.APIClient):
    """An API client that ignores REQUESTS_CA_BUNDLE, proxies and the like from the environment: a
    bundle set there would replace the swarm's CA for every request (requests prefers it), and an
    engine is never reached through a proxy."""

    @property
    def trust_env(self) -> bool:
        return False

    @trust_env.setter
    def trust_env(self, value: bool) -> None:
        pass


class SwarmSettingsError(ValueError):
    """A SERVICE_SWARM_* variable is missing or malformed (the message names it)."""


@dataclass(frozen=True)
class SwarmSettings:
    manager: str
    nodes: dict[str, str] = field(default_factory=dict)  # node hostname -> engine URL
    images: dict[str, str] = field(default_factory=dict)  # image a spec names -> registry ref by digest
    cert_path: str = ""  # directory of ca.pem, cert.pem, key.pem: mutual TLS to every tcp:// engine
    ssh_config: str = ""  # ssh_config file for every ssh:// engine ("": the user's own)
    # where built images (Dockerfile bases) are pushed, host:port as the nodes name it ("": the
    # registry of SERVICE_SWARM_IMAGES' references)
    registry_setting: str = ""
    local_engine: str = "unix:///var/run/docker.sock"  # svcd's own engine, where Dockerfile bases are built

    @property
    def registry(self) -> str:
        if self.registry_setting:
            return self.registry_setting
        for ref in self.images.values():
            host = ref.split("/", 1)[0]
            if "/" in ref and ("." in host or ":" in host or host == "localhost"):
                return host
        return ""

    def client_options(self, url: str) -> dict[str, Any]:
        """docker.APIClient keyword arguments that reach the engine at `url` (TLS; an ssh:// engine is
        reached through its tunnel's unix socket and needs none)."""
        scheme = urlparse(url).scheme
        if scheme == "tcp" and self.cert_path:
            d = Path(self.cert_path)
            return {"tls": TLSConfig(client_cert=(str(d / "cert.pem"), str(d / "key.pem")), ca_cert=str(d / "ca.pem"),
                                     verify=True)}
        return {}

    def api_client(self, url: str, **kwargs: object):
        """An API client for the tcp:// or unix:// engine at `url` (an ssh:// one needs its tunnel:
        driver.RemoteEngine)."""
        return EngineClient(base_url=url, **kwargs, **self.client_options(url))


def _pairs(name: str, raw: str, limit: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for index, item in enumerate(p for p in raw.split(",") if p.strip()):
        key, sep, value = item.strip().partition("=")
        if not sep or not key or not value:
            raise SwarmSettingsError(f"{name}: item {index} is not KEY=VALUE: {item.strip()[:80]!r}")
        out[key] = value
    if len(out) > limit:
        raise SwarmSettingsError(f"{name}: {len(out)} items, at most {limit}")
    return out


def from_env(env: Mapping[str, str]) -> SwarmSettings:
    manager = env.get("SERVICE_SWARM_MANAGER", "").strip()
    if not manager:
        raise SwarmSettingsError("SERVICE_SWARM_MANAGER is not set (the swarm manager's engine URL; "
                                 "`make swarm-up` writes it to .svc-home/swarm.env)")
    nodes = _pairs("SERVICE_SWARM_NODES", env.get("SERVICE_SWARM_NODES", ""), MAX_NODES)
    images = _pairs("SERVICE_SWARM_IMAGES", env.get("SERVICE_SWARM_IMAGES", ""), 256)
    for ref, target in images.items():
        if "@sha256:" not in target:
            raise SwarmSettingsError(f"SERVICE_SWARM_IMAGES: {ref} must map to a reference by digest (…@sha256:…)")
    cert_path = env.get("SERVICE_SWARM_CERT_PATH", "").strip()
    if cert_path:
        missing = [name for name in CERT_FILES if not (Path(cert_path) / name).is_file()]
        if missing:
            raise SwarmSettingsError(f"SERVICE_SWARM_CERT_PATH: {cert_path} has no {', '.join(missing)} "
                                     f"(it holds {', '.join(CERT_FILES)}, as DOCKER_CERT_PATH does)")
    ssh_config = env.get("SERVICE_SWARM_SSH_CONFIG", "").strip()
    if ssh_config and not Path(ssh_config).is_file():
        raise SwarmSettingsError(f"SERVICE_SWARM_SSH_CONFIG: {ssh_config} is not a file (an ssh_config for the ssh:// engines)")
    for name, url in [("SERVICE_SWARM_MANAGER", manager), *((f"SERVICE_SWARM_NODES: {n}", u) for n, u in nodes.items())]:
        _check_url(name, url, bool(cert_path))
    registry = env.get("SERVICE_SWARM_REGISTRY", "").strip()
    if registry and ("/" in registry or not registry.replace(".", "").replace(":", "").replace("-", "").isalnum()):
        raise SwarmSettingsError(f"SERVICE_SWARM_REGISTRY: {registry[:80]!r} is not a registry host[:port]")
    local = env.get("DOCKER_HOST", "").strip() or "unix:///var/run/docker.sock"
    return SwarmSettings(manager=manager, nodes=nodes, images=images, cert_path=cert_path, ssh_config=ssh_config,
                         registry_setting=registry, local_engine=local)


def _check_url(name: str, url: str, tls: bool) -> None:
    scheme = urlparse(url).scheme
    if scheme not in SCHEMES:
        raise SwarmSettingsError(f"{name}: {url[:80]!r} is not a tcp://, ssh:// or unix:// engine URL")
    if scheme == "tcp" and not tls:
        raise SwarmSettingsError(f"{name}: {url[:80]} is plain tcp:// and SERVICE_SWARM_CERT_PATH is not set: an "
                                 "engine's API is root on its node, so svcd reaches it over mutual TLS or ssh://")


def read_env_file(text: str) -> dict[str, str]:
    """The NAME=value lines of a swarm.env file."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out
