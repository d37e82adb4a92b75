"""Resolving and running the spec's agent.

* ``snapshot``: ``snapshot_id`` pins one version; ``snapshot`` (a name) resolves to its latest.
  The bundle is extracted to ``/agent``; ``entrypoint`` (the spec's override, else the snapshot's)
  runs in ``/workspace``. An argument naming a file of the bundle (``agent.py``, ``./bin/run``) is
  rewritten to its ``/agent/...`` path, so an entrypoint written relative to the bundle root works.
  ``auth.required_env`` is checked at boot, ``auth.config_files`` are written after boot with
  ``{{ NAME }}`` replaced by secrets (or agent env), ``auth.egress`` hosts are added to the egress
  allowlist unless the spec forbids the HTTP they would need (``forbidden.http_except``).
* ``cli``: ``binary`` + ``args`` inside the sandbox's base image.
* ``image``: the agent is its own container from ``agent.image`` on the sandbox network, with the
  workspace mounted at ``/workspace`` and the agent environment; ``command`` overrides its default.
* ``installed``: Claude Code, Codex CLI or mini-swe-agent installed into a layer on the spec's base
  (daemon/agents/installed/): the sandbox boots from that layer (`ResolvedAgent.base_image`) and the
  agent runs headless in ``/workspace``, its model calls through the sandbox's model gateway.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.store.db import loads

if TYPE_CHECKING:
    from aiohttp import web

    from daemon.sandbox.handle import Sandbox
    from daemon.spec.models import SpecDocument

OUTPUT_TAIL_BYTES = 1024 * 1024  # of an image agent's stdout and of its stderr
TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class AgentResolveError(Exception):
    pass


@dataclass
class ResolvedAgent:
    kind: str  # snapshot | cli | image | none
    argv: list[str] = field(default_factory=list)
    name: str | None = None
    snapshot: dict[str, Any] | None = None
    bundle: Path | None = None
    required_env: list[str] = field(default_factory=list)
    config_files: list[dict[str, str]] = field(default_factory=list)
    egress: dict[str, list[str]] = field(default_factory=dict)
    image: str | None = None
    timeout_s: float = 300.0
    base_image: str | None = None  # the image the sandbox boots from instead of the spec's base
    env: dict[str, str] = field(default_factory=dict)  # what the agent's command needs set
    installed: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "name": self.name, "command": self.argv, "timeout_s": self.timeout_s}
        if self.snapshot:
            out.update({"snapshot_id": self.snapshot["id"], "version": self.snapshot["version"], "digest": "sha256:" + self.snapshot["digest"]})
        if self.image:
            out["image"] = self.image
        if self.installed:
            out.update(self.installed)
        return out


def _bundle_argv(argv: list[str], files: list[str]) -> list[str]:
    known = set(files)
    out = []
    for arg in argv:
        rel = arg[2:] if arg.startswith("./") else arg
        out.append(f"/agent/{rel}" if rel in known and not arg.startswith("/") else arg)
    return out


async def resolve(app: "web.Application", tenant_id: str, spec: "SpecDocument", pinned_snapshot: str | None = None) -> ResolvedAgent:
    """The spec's agent; `pinned_snapshot` (a reproducer's or a replay's) instead of the latest
    snapshot of the spec's `agent.snapshot` name."""
    agent = spec.agent
    if agent is None:
        return ResolvedAgent("none")
    timeout = float(agent.timeout)
    if agent.type == "cli":
        return ResolvedAgent("cli", [agent.binary, *agent.args], name=agent.binary, timeout_s=timeout)
    if agent.type == "image":
        return ResolvedAgent("image", list(agent.command or []), name=agent.image, image=agent.image, timeout_s=timeout)
    if agent.type == "installed":
        from daemon.agents.installed import InstalledError, prepare

        try:
            ready = await prepare(app, spec, agent)
        except InstalledError as exc:
            raise AgentResolveError(str(exc)) from exc
        return ResolvedAgent("installed", ready.argv, name=ready.name, timeout_s=timeout, base_image=ready.layer,
                             env=ready.env, installed=ready.describe)
    from daemon.agents.store import get_store

    snaps = get_store(app)
    if pinned_snapshot:
        row = await snaps.by_id(pinned_snapshot)
        if row is None or row["tenant_id"] != tenant_id:
            raise AgentResolveError(f"the agent snapshot '{pinned_snapshot}' this run pins (the source run's) is gone; "
                                    "run without pins.agent_snapshot_id to use the latest")
    elif agent.snapshot_id:
        row = await snaps.by_id(agent.snapshot_id)
        if row is None or row["tenant_id"] != tenant_id:
            raise AgentResolveError(f"agent snapshot '{agent.snapshot_id}' not found (agent.snapshot_id)")
    else:
        row = await snaps.latest(tenant_id, agent.snapshot or "")
        if row is None:
            raise AgentResolveError(f"no agent snapshot named '{agent.snapshot}' (agent.snapshot); upload one with `svc agents upload`")
    bundle = snaps.bundle_path(row)
    if not bundle.is_file():
        raise AgentResolveError(f"the bundle of snapshot '{row['id']}' is missing from the blob store")
    auth = loads(row["auth"], None) or {}
    files = loads(row["files"], [])
    argv = _bundle_argv(list(agent.entrypoint or loads(row["entrypoint"], [])), files)
    return ResolvedAgent(
        "snapshot", argv, name=row["name"], snapshot=dict(row), bundle=bundle,
        required_env=list(auth.get("required_env") or []), config_files=list(auth.get("config_files") or []),
        egress=dict(auth.get("egress") or {}), timeout_s=timeout,
    )



def render_template(template: str, values: dict[str, str]) -> tuple[str, list[str]]:
    missing: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        missing.append(name)
        return match.group(0)

    return TEMPLATE.sub(sub, template), missing


async def write_config_files(sandbox: Sandbox, agent: ResolvedAgent, values: dict[str, str]) -> list[str]:
    """Write ``auth.config_files`` into the sandbox; returns the paths. Not recorded in the audit
    log (the content holds secrets)."""
    written = []
    for entry in agent.config_files:
        content, missing = render_template(entry["template"], values)
        if missing:
            raise AgentResolveError(f"config file {entry['path']}: no secret or env value for {', '.join(missing)}")
        path = entry["path"] if entry["path"].startswith(("/", "~")) else f"/workspace/{entry['path']}"
        if path.startswith("~"):
            path = "$HOME" + path[1:]
        encoded = base64.b64encode(content.encode()).decode()
        script = f'p="{path}"; mkdir -p "$(dirname "$p")" && printf %s {encoded} | base64 -d > "$p" && chmod 600 "$p"'
        result = await sandbox.exec(["sh", "-c", script], timeout_s=30, record=False)
        if result.exit_code != 0:
            raise AgentResolveError(f"cannot write config file {entry['path']}: {(result.stderr or '').strip()[:300]}")
        written.append(entry["path"])
    return written


@dataclass
class AgentOutcome:
    command: list[str]
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    duration_ms: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    engine_lost: bool = False  # the daemon saw its connection to the engine break while the agent ran

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command, "exit_code": self.exit_code, "duration_ms": self.duration_ms,
            "timed_out": self.timed_out, "oom_killed": self.oom_killed, "stdout": self.stdout, "stderr": self.stderr,
        }


async def run_in_sandbox(sandbox: Sandbox, agent: ResolvedAgent, env: dict[str, str]) -> AgentOutcome:
    result = await sandbox.exec(agent.argv, timeout_s=agent.timeout_s, env={**agent.env, **env}, workdir="/workspace")
    return AgentOutcome(agent.argv, result.stdout, result.stderr, result.exit_code, result.duration_ms,
                        result.timed_out, result.oom_killed, result.engine_lost)


async def run_image(sandbox: Sandbox, agent: ResolvedAgent, env: dict[str, str], run_id: str) -> AgentOutcome:
    """Run an ``image`` agent as its own container on the sandbox network (`Sandbox.run_container`),
    its output read from the engine that ran it."""
    from daemon.sandbox.engine import ContainerSpec

    assert agent.image is not None, "an image agent names its image"
    sb = sandbox.runtime
    spec = ContainerSpec(
        name=f"svc-{sandbox.id}-agent-{run_id[-8:]}", image=agent.image, command=agent.argv or None,
        env={**sb.agent_env, **sb.secrets, **env}, labels={"svc.role": "agent-image"}, network=sb.network,
        aliases=["agent"], binds={str(sb.workspace): ("/workspace", "rw")}, working_dir="/workspace",
        init=True, nano_cpus=int(sb.limits.cpus * 1e9), mem_limit=sb.limits.memory, pids_limit=sb.limits.pids,
        extra_hosts=dict(getattr(sb, "extra_hosts", {}) or {}),
    )
    ended = await sandbox.run_container(spec, timeout_s=agent.timeout_s)
    try:
        # the agent decides how much it prints: the last OUTPUT_TAIL_BYTES of each stream
        raw_out, raw_err = await sandbox.logs(ended.id, OUTPUT_TAIL_BYTES)
        out, err = raw_out.decode("utf-8", "replace"), raw_err.decode("utf-8", "replace")
    except Exception as exc:  # noqa: BLE001
        out, err = "", f"(logs unavailable: {exc})"
    if ended.timed_out:
        err += f"\n[svc] agent timed out after {agent.timeout_s:g}s and was killed\n"
    await sandbox.remove_container(ended.id)
    return AgentOutcome(list(agent.argv) or [agent.image], out, err, ended.exit_code, ended.duration_ms, ended.timed_out,
                        ended.oom_killed)
