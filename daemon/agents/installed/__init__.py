"""Installed agents: Claude Code, Codex CLI and mini-swe-agent, installed from their registries
(npm, PyPI) into an image layer on top of the spec's base (`layer.py`) and run headless in
/workspace (`recipes.py`), their model traffic through the sandbox's model gateway.

    agent: {type: installed, name: claude-code, version: "2.1.332", model: claude-sonnet-4-5, max_turns: 30, timeout: 10m}

`prepare` builds (or finds) the layer and says how to run the agent; daemon/runner/agent.py turns
that into the run's resolved agent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daemon.agents.installed.layer import LayerError, ca_bundle, ensure_layer
from daemon.agents.installed.recipes import NAMES, RECIPES, command

__all__ = ["NAMES", "RECIPES", "InstalledError", "Prepared", "prepare"]


class InstalledError(Exception):
    pass


@dataclass
class Prepared:
    argv: list[str]
    name: str  # name@version
    layer: str  # the image the sandbox boots from
    env: dict[str, str]
    describe: dict[str, Any]  # shown in Run.agent


async def prepare(app: Any, spec: Any, agent: Any) -> Prepared:
    """The agent's layer, built (or found) for the spec's base image, and its command."""
    from daemon.appkeys import SANDBOXES, SETTINGS

    recipe = RECIPES[agent.name]
    base = spec.base
    if not isinstance(base, str):
        raise InstalledError(f"the installed agent '{agent.name}' needs base: to be an image reference (its layer is "
                             "built on top of it); a Dockerfile base (base: {build: ...}) cannot carry one yet")
    driver = app[SANDBOXES].driver
    # The layer is built on svcd's own engine; on a swarm the driver then pushes it to the registry
    # its nodes pull from, by digest (engine/swarm/driver.py `publish`, at the boot's image step).
    build_api = driver.api if driver.runtime == "docker" else getattr(driver, "build_api", lambda: None)()
    if build_api is None:
        raise InstalledError(f"the installed agent '{agent.name}' needs an engine to build its layer on "
                             f"(this daemon's engine, {driver.runtime}, has none)")
    try:
        ca = ca_bundle(getattr(app[SETTINGS], "build_ca_bundle", None))
        layer = await ensure_layer(build_api, base, recipe, agent.version, ca)
    except LayerError as exc:
        raise InstalledError(f"cannot build the {agent.name} {agent.version} layer: {exc}") from exc
    return Prepared(
        command(recipe, agent.model, agent.max_turns), f"{agent.name}@{agent.version}", layer, dict(recipe.env),
        {"package": recipe.package, "version": agent.version, "model": agent.model, "max_turns": agent.max_turns,
         "layer": layer},
    )
