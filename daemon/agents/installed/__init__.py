"""Installed agents: Claude Code, Codex CLI and mini-swe-agent, installed from their registries
(npm, PyPI) into an image layer on top of the spec's base (`layer.py`) and run headless in
/workspace (`recipes.py`), their model traffic through the sandbox's model gateway.

    agent: {type: installed, name: claude-code, version: "2.1.332", model: claude-sonnet-4-5, max_turns: 30, timeout: 10m}
"""
from __future__ import annotations

from typing import Any

from daemon.agents.installed.layer import LayerError, ensure_layer
from daemon.agents.installed.recipes import NAMES, RECIPES, command

__all__ = ["NAMES", "RECIPES", "resolve_installed"]


async def resolve_installed(app: Any, spec: Any, agent: Any, timeout_s: float) -> Any:
    """The agent, its layer built (or found) for the spec's base image."""
    from daemon.appkeys import SANDBOXES
    from daemon.runner.agent import AgentResolveError, ResolvedAgent

    recipe = RECIPES[agent.name]
    base = spec.base if isinstance(spec.base, str) else getattr(spec.base, "image", None)
    if not isinstance(base, str):
        raise AgentResolveError(f"the installed agent '{agent.name}' needs base: to name an image "
                                "(a layer is built on top of it)")
    driver = app[SANDBOXES].driver
    if driver.runtime != "docker":  # a swarm's nodes would not have the layer built here
        raise AgentResolveError(f"the installed agent '{agent.name}' needs the local Docker engine to build its layer "
                                f"(this daemon's engine is {driver.runtime})")
    api = driver.api
    try:
        layer = await ensure_layer(api, base, recipe, agent.version)
    except LayerError as exc:
        raise AgentResolveError(f"cannot build the {agent.name} {agent.version} layer: {exc}") from exc
    return ResolvedAgent(
        "installed", command(recipe, agent.model, agent.max_turns), name=f"{agent.name}@{agent.version}",
        timeout_s=timeout_s, base_image=layer, env=dict(recipe.env),
        installed={"package": recipe.package, "version": agent.version, "model": agent.model,
                   "max_turns": agent.max_turns, "layer": layer},
    )
