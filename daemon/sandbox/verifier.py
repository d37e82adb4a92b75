"""Where a command check runs, and whether the agent's container can still be trusted to run it.

`check_exec` runs a check's command with the toolset's shell and timeout (toolset.py): in the agent
container (`isolation: agent`), or in a fresh verifier container made like it, from the same image,
with the workspace, the toolset and the sandbox network but nothing the agent wrote outside
/workspace (`isolation: clean`), removed right after.

`tampered_paths` reads the engine's filesystem diff of the agent container (the daemon's own
observation, which the agent cannot forge) and names the files through which a command in that
container could run the agent's code instead of the image's.
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from daemon.errors import Conflict
from daemon.sandbox import toolset

if TYPE_CHECKING:
    from daemon.sandbox.commands import SandboxCommands
    from daemon.sandbox.engine import ContainerInfo, ContainerSpec, SandboxDriver
    from daemon.sandbox.models import ExecResult
    from daemon.sandbox.runtime import SandboxRuntime

    RunAux = Callable[[SandboxRuntime, ContainerSpec, bool], Awaitable[ContainerInfo]]

log = logging.getLogger("svcd.sandbox")


async def check_exec(sb: SandboxRuntime, commands: SandboxCommands, run_aux: RunAux, command: str, *,
                     timeout_s: float, env: dict[str, str] | None, clean: bool) -> ExecResult:
    if not clean:
        await commands.live.require_ready(sb.id)
        return await commands.run_command(sb, command, timeout_s=timeout_s, env=env, workdir="/workspace", user=None,
                                          background=False, record=True, transition=True, trusted=True)
    if sb.agent_spec is None:
        raise Conflict(f"sandbox '{sb.id}' has no agent container to copy for a clean verifier", "not_ready")
    spec = clean_spec(sb.agent_spec, f"svc-{sb.id}-verifier-{secrets.token_hex(3)}")
    info = await run_aux(sb, spec, False)
    try:
        return await commands.run_command(sb, command, timeout_s=timeout_s, env=env, workdir="/workspace", user=None,
                                          background=False, record=True, transition=False, trusted=True,
                                          container=info.id)
    finally:
        try:
            await commands.driver.remove_container(info.id)
            sb.aux[:] = [c for c in sb.aux if c.id != info.id]
        except Exception as exc:  # noqa: BLE001 - the sandbox's teardown removes it with the rest
            log.warning("cannot remove the verifier container %s: %s", info.id[:12], exc)


def clean_spec(agent: Any, name: str) -> Any:
    """The agent container's spec for a verifier: the same image, binds (workspace, toolset, bundle),
    environment and limits; no fixed address, published ports or network aliases (it must not
    answer for `sandbox`)."""
    labels = {**agent.labels, "svc.role": "verifier"}
    return dataclasses.replace(
        agent, name=name, labels=labels, aliases=[], ipv4_address=None, ports={},
        extra_networks={net: [] for net in agent.extra_networks}, env=dict(agent.env), binds=dict(agent.binds),
    )


async def tampered_paths(sb: SandboxRuntime, driver: SandboxDriver, entries: list[dict[str, Any]]) -> list[str]:
    """The agent container's files a command check could be deceived through (toolset.tampered_paths),
    from the engine's diff `entries`."""
    changes = [c for c in diff_leaves(entries) if not _mountpoint(c["path"], mount_targets(sb.agent_spec))]
    candidates = toolset.shadow_candidates(changes)
    resolved: dict[str, str] = {}
    if candidates:
        agent = sb.agent
        assert agent is not None
        raw = await driver.exec(agent.id, [toolset.SH, "-c", toolset.RESOLVE_SH, "resolve", *candidates],
                                              env=toolset.trusted_env(), user="0", watchdog_s=30)
        resolved = toolset.parse_resolved(raw.stdout.decode("utf-8", "replace"))
    return toolset.tampered_paths(changes, resolved)


DOCKER_INIT = "/usr/sbin/docker-init"  # the engine's init, bind-mounted read-only where `init: true`


def mount_targets(agent: Any) -> set[str]:
    """Where the daemon and the engine mount things into the agent container: their mountpoints show
    up in the diff as added, and are no program of the agent's."""
    if agent is None:
        return set()
    targets = {target for target, _ in agent.binds.values()}
    return targets | {DOCKER_INIT} if agent.init else targets


def _mountpoint(path: str, targets: set[str]) -> bool:
    return path in targets or any(t.startswith(path.rstrip("/") + "/") for t in targets)


DIFF_KINDS = {0: "modified", 1: "added", 2: "deleted"}


def diff_leaves(entries: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The engine's filesystem diff ({Path, Kind}) as changed files outside /workspace and /agent
    (leaves only: a directory whose children are listed is left out; Python bytecode caches ignored)."""
    paths = {e["Path"]: DIFF_KINDS.get(e["Kind"], "modified") for e in entries}
    # sorted, a directory's children follow it right away (with "/" sorting before every other
    # character a name may hold after it): one look at the next path tells a parent (n log n;
    # the agent decides how many paths there are)
    ordered = sorted(paths, key=lambda p: p.rstrip("/").replace("/", "\0"))
    leaves = []
    for i, path in enumerate(ordered):
        kind = paths[path]
        if path == "/workspace" or path.startswith("/workspace/") or path == "/agent" or path.startswith("/agent/"):
            continue
        if "__pycache__" in path or path.endswith(".pyc"):
            continue
        following = ordered[i + 1] if i + 1 < len(ordered) else ""
        if kind == "modified" and following.startswith(path.rstrip("/") + "/"):
            continue  # a directory whose children are listed
        leaves.append({"path": path, "change": kind})
    return sorted(leaves, key=lambda c: c["path"])
