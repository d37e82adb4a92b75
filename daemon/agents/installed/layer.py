"""The image layer of an installed agent: the spec's base image with the agent installed, built
once per (base image id, agent, version, recipe) and tagged by that digest, so a second run,
another spec on the same base or the warm pool (whose shape key holds the image) reuses it.

The build is a container of the base image running the install script, committed to the tag:
no BuildKit is needed, and the operator's CA bundle (the `build_ca_bundle` setting,
SERVICE_BUILD_CA_BUNDLE, default the host's trust store) is bind-mounted read-only for the
downloads, so it is never part of the image. The
container reaches the registries through the engine's default bridge, as `docker build` does.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from typing import Any

from daemon.agents.installed.recipes import CA_MOUNT, RECIPE_VERSION, Recipe, install_script

log = logging.getLogger("svcd.agents.installed")

REPOSITORY = "localhost/svc-agent"
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BUILD_TIMEOUT_S = 1200.0
BUILD_MEMORY = "4g"
BUILD_PIDS = 4096
LOG_TAIL = 40

_locks: dict[str, asyncio.Lock] = {}


class LayerError(Exception):
    pass


def ca_bundle(setting: str | None) -> str | None:
    """The CA bundle mounted into builds: the `build_ca_bundle` setting (SERVICE_BUILD_CA_BUNDLE,
    the one Dockerfile bases use; `off` for none), the host's trust store when it is not set."""
    value = str(setting if setting is not None else DEFAULT_CA_BUNDLE).strip()
    if value.lower() in ("", "off", "none"):
        return None
    if not os.path.isfile(value):
        if value == DEFAULT_CA_BUNDLE:
            return None  # no host trust store to give: the downloads use the image's own
        raise LayerError(f"SERVICE_BUILD_CA_BUNDLE={value}: no such file (the CA bundle given to builds)")
    return value


def layer_digest(base_id: str, recipe: Recipe, version: str) -> str:
    return hashlib.sha256(json.dumps([RECIPE_VERSION, base_id, recipe.name, recipe.package, version,
                                      install_script(recipe, version)]).encode()).hexdigest()


async def ensure_layer(api: Any, base: str, recipe: Recipe, version: str, ca: str | None) -> str:
    """The layer's tag, built now unless an image with it exists. Concurrent runs of one spec wait
    for one build."""
    base_id = await asyncio.to_thread(_base_id, api, base)
    digest = layer_digest(base_id, recipe, version)
    tag = f"{REPOSITORY}/{recipe.name}:{digest[:16]}"
    lock = _locks.setdefault(tag, asyncio.Lock())
    async with lock:
        if not await asyncio.to_thread(_exists, api, tag):
            await asyncio.to_thread(_build, api, base, recipe, version, tag, digest, ca)
    return tag


def _base_id(api: Any, base: str) -> str:
    import docker.errors

    try:
        return api.inspect_image(base)["Id"]
    except docker.errors.ImageNotFound:
        pass
    try:
        repo, _, tag = base.rpartition(":") if ":" in base.rsplit("/", 1)[-1] else (base, "", "latest")
        api.pull(repo, tag=tag or "latest")
        return api.inspect_image(base)["Id"]
    except Exception as exc:  # noqa: BLE001 - any engine error says the same to the user
        raise LayerError(f"base image {base} is not present and could not be pulled: {str(exc).splitlines()[0][:300]}")


def _exists(api: Any, tag: str) -> bool:
    import docker.errors

    try:
        api.inspect_image(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(api: Any, base: str, recipe: Recipe, version: str, tag: str, digest: str, ca: str | None) -> None:
    config = api.inspect_image(base).get("Config") or {}
    binds = {ca: {"bind": CA_MOUNT, "mode": "ro"}} if ca else {}
    log.info("building the %s %s layer on %s as %s", recipe.name, version, base, tag)
    script = install_script(recipe, version)
    # The committed image keeps the build container's entrypoint and command: with no entrypoint in
    # the base, none is set here (a commit cannot clear one); the base's own is restored below.
    entrypoint = config.get("Entrypoint")
    run = {"entrypoint": ["/bin/sh", "-c"], "command": [script]} if entrypoint else {"command": ["/bin/sh", "-c", script]}
    # The base is the tenant's image: its programs run here, so the build is bounded like a sandbox
    # (memory, processes) and has the CA bundle read-only; only the network is the engine's bridge.
    host_config = api.create_host_config(binds=binds, mem_limit=BUILD_MEMORY, pids_limit=BUILD_PIDS)
    container = api.create_container(
        base, user="0", labels={"svc.role": "agent-layer-build"}, host_config=host_config, **run,
    )["Id"]
    try:
        api.start(container)
        try:
            status = api.wait(container, timeout=BUILD_TIMEOUT_S).get("StatusCode")
        except Exception:  # noqa: BLE001 - the wait's read timed out
            status = None
        if status != 0:
            tail = api.logs(container, stdout=True, stderr=True, tail=LOG_TAIL).decode("utf-8", "replace").strip()
            why = f"exited {status}" if status is not None else f"did not finish in {BUILD_TIMEOUT_S:g}s"
            raise LayerError(f"installing {recipe.package}@{version} on {base} {why}:\n{tail}")
        changes = [*([f"ENTRYPOINT {json.dumps(entrypoint)}"] if entrypoint else []),
                   *([f"CMD {json.dumps(config['Cmd'])}"] if config.get("Cmd") else []),
                   f"USER {config.get('User') or 'root'}",
                   f"LABEL svc.role=agent-layer svc.agent={recipe.name} svc.agent.version={version} "
                   f"svc.agent.digest=sha256:{digest}"]
        api.commit(container, repository=tag.rsplit(":", 1)[0], tag=tag.rsplit(":", 1)[1], changes=changes,
                   message=f"svc: {recipe.package}@{version}")
    finally:
        try:
            api.remove_container(container, force=True)
        except Exception:  # noqa: BLE001 - a leftover build container is harmless and labelled
            log.warning("could not remove the layer build container %s", container[:12])
