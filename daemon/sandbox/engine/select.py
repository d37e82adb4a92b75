"""Which driver runs sandboxes: SERVICE_ENGINE=docker (the local engine) or swarm (SERVICE_SWARM_*)."""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from daemon.sandbox.engine import SandboxDriver
from daemon.sandbox.engine.docker import DockerDriver
from daemon.sandbox.engine.swarm.driver import SwarmDriver
from daemon.sandbox.engine.swarm.settings import SwarmSettingsError, from_env

if TYPE_CHECKING:
    from daemon.config import Settings

log = logging.getLogger("svcd.sandbox")

ENGINES = ("docker", "swarm")


def make_driver(settings: Settings) -> SandboxDriver:
    engine = getattr(settings, "engine", "docker") or "docker"
    if engine == "docker":
        return DockerDriver()
    if engine != "swarm":
        raise SwarmSettingsError(f"SERVICE_ENGINE={engine!r}: one of {', '.join(ENGINES)}")
    try:
        swarm = from_env({
            "SERVICE_SWARM_MANAGER": settings.swarm_manager,
            "SERVICE_SWARM_NODES": settings.swarm_nodes,
            "SERVICE_SWARM_IMAGES": settings.swarm_images,
            "SERVICE_SWARM_CERT_PATH": getattr(settings, "swarm_cert_path", ""),
            "SERVICE_SWARM_SSH_CONFIG": getattr(settings, "swarm_ssh_config", ""),
            # where Dockerfile bases built on this host's engine are pushed for the nodes
            "SERVICE_SWARM_REGISTRY": os.environ.get("SERVICE_SWARM_REGISTRY", ""),
            "DOCKER_HOST": os.environ.get("DOCKER_HOST", ""),
        })
    except SwarmSettingsError as exc:  # svcd stops at start saying which setting, not with a traceback
        raise SystemExit(f"svcd: {exc}") from None
    return SwarmDriver(swarm)
