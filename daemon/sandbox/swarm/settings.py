"""Where the swarm is: the manager's engine, each node's engine, the stock images' digests.

Read from the `NAME=value` lines `make swarm-up` writes to .svc-home/swarm.env (or set by hand
for an existing swarm):

    SERVICE_SWARM_MANAGER=tcp://10.0.0.2:2375            (or ssh://user@host, or tcp:// with TLS env)
    SERVICE_SWARM_NODES=node-1=tcp://10.0.0.2:2375,node-2=tcp://10.0.0.3:2375
    SERVICE_SWARM_IMAGES=localhost/svc/python:3.11=registry:5000/svc/python@sha256:...,...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

MAX_NODES = 64


class SwarmSettingsError(ValueError):
    """A SERVICE_SWARM_* variable is missing or malformed (the message names it)."""


@dataclass(frozen=True)
class SwarmSettings:
    manager: str
    nodes: dict[str, str] = field(default_factory=dict)  # node hostname -> engine URL
    images: dict[str, str] = field(default_factory=dict)  # image a spec names -> registry ref by digest


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
    return SwarmSettings(manager=manager, nodes=nodes, images=images)


def read_env_file(text: str) -> dict[str, str]:
    """The NAME=value lines of a swarm.env file."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out
