"""`Sandbox`: a handle on one live sandbox, what a run does with it (`manager.open(id)`).

The scenario runner, the invariant checks (`CheckContext.sandbox`), the teardown exports and image
agents use a sandbox only through this handle, never the manager's parts, the engine or the host
workspace directly. Each method says what it raises; the daemon's errors (`daemon.errors`) carry
their HTTP status, the workspace's (`workspace.PathError`, `FileMissing`, `NotRegularFile`) mean
the path cannot be opened without following a link, is absent, or is not a regular file.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from daemon.errors import NotFound
from daemon.sandbox import verifier
from daemon.sandbox import workspace as ws
from daemon.sandbox.audit import AuditLog
from daemon.sandbox.commands import SandboxCommands
from daemon.sandbox.engine import ContainerInfo, ContainerSpec, SandboxDriver
from daemon.sandbox.files import WorkspaceFiles
from daemon.sandbox.host_workspace import HostWorkspace
from daemon.sandbox.models import ExecResult
from daemon.sandbox.network import flush_audit
from daemon.sandbox.runtime import SandboxRuntime
from daemon.sandbox.services import ServicePlan

CONTAINER_POLL_S = 0.25
TEARDOWN_WAIT_S = 120.0


@dataclass(frozen=True)
class SandboxParts:
    """The manager's parts a handle works through (one set per manager, shared by every handle)."""

    commands: SandboxCommands
    files: WorkspaceFiles
    workspaces: HostWorkspace
    driver: SandboxDriver
    run_aux_container: Callable[[SandboxRuntime, ContainerSpec, bool], Any]


@dataclass(frozen=True)
class BootResult:
    """How a sandbox's boot ended: `sandbox`, a handle on it, once it is ready; else the state it
    ended in (`error`: `step` and `message` say why; `stopped`: destroyed while booting)."""

    sandbox_id: str
    state: str
    step: str | None = None
    message: str | None = None
    sandbox: Sandbox | None = None

    @property
    def error(self) -> dict[str, str] | None:
        """The failed boot's `{step, message}` (the sandbox body's `error`)."""
        if self.step is None and self.message is None:
            return None
        return {"step": self.step or "?", "message": self.message or ""}


@dataclass(frozen=True)
class ContainerExit:
    """How a container `Sandbox.run_container` started ended (`exit_code` None: killed at its
    timeout, or gone)."""

    id: str
    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    duration_ms: int


class Booting:
    """A sandbox whose boot is under way (`SandboxManager.boot`): its `id` at once, and how the
    boot ended from `result()`."""

    def __init__(self, runtime: SandboxRuntime, parts: SandboxParts):
        self.runtime = runtime
        self.parts = parts

    @property
    def id(self) -> str:
        return self.runtime.id

    async def result(self) -> BootResult:
        """Waits for the boot to end (ready, failed and torn down, or destroyed while booting).
        Cancelling the caller does not cancel the boot."""
        sb = self.runtime
        task = sb.boot_task
        if task is not None:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
                # destroyed while booting: answered once the teardown finished
                await asyncio.wait_for(sb.ended.wait(), TEARDOWN_WAIT_S)
        if sb.state in ("ready", "running"):
            return BootResult(sb.id, sb.state, sandbox=Sandbox(sb, self.parts))
        failure = sb.boot_failure
        if failure is not None:
            return BootResult(sb.id, "error", failure.step, failure.message)
        return BootResult(sb.id, sb.state)


class Sandbox:
    """One live sandbox. `runtime` is its in-memory record (limits, the agent's environment, the
    extensions' state), read-only to the handle's users."""

    def __init__(self, runtime: SandboxRuntime, parts: SandboxParts):
        self.runtime = runtime
        self.parts = parts

    @property
    def id(self) -> str:
        return self.runtime.id

    @property
    def tenant_id(self) -> str:
        return self.runtime.tenant_id

    @property
    def workspace(self) -> Path:
        """The host directory of its /workspace (read it with the methods below, never directly)."""
        return self.runtime.workspace

    # --- commands ------------------------------------------------------------------------------

    async def exec(self, command: str | list[str], *, timeout_s: float | None = None, env: dict[str, str] | None = None,
                   workdir: str = "/workspace", background: bool = False, user: str | None = None,
                   record: bool = True) -> ExecResult:
        """`command` in the agent container (a string through `sh -c`), killed past `timeout_s`.
        Raises InvalidRequest (empty command), NotFound (no such sandbox), Conflict (not ready, or
        stopped while the command ran)."""
        return await self.parts.commands.exec(self.id, command, timeout_s=timeout_s, env=env, workdir=workdir,
                                              background=background, user=user, record=record)

    async def check_exec(self, command: str, *, timeout_s: float, env: dict[str, str] | None = None,
                         clean: bool = False) -> ExecResult:
        """A check's `command` with the daemon's own shell (verifier.py): in the agent container, or
        (`clean`) in a fresh verifier container made like it. Raises NotFound/Conflict (not ready)."""
        return await verifier.check_exec(self.runtime, self.parts.commands, self.parts.run_aux_container, command,
                                         timeout_s=timeout_s, env=env, clean=clean)

    async def agent_running(self) -> bool | None:
        """Whether the agent container is running, as the engine says (None: it does not know the
        container). Raises the engine's errors."""
        agent = self.runtime.agent
        if agent is None:
            return None
        state = await self.parts.driver.container_state(agent.id)
        return None if state is None else bool(state.get("Running"))

    async def tampered_paths(self) -> list[str] | None:
        """Files of the agent container's image the agent replaced or shadowed (verifier.py); None
        when the engine cannot tell. Raises the engine's errors."""
        entries = await self.container_changes()
        if entries is None:
            return None
        return await verifier.tampered_paths(self.runtime, self.parts.driver, entries)

    async def service_exec(self, service: str, command: list[str], timeout_s: float = 30) -> ExecResult:
        """`command` in a backing service's container. Raises NotFound (no such sandbox or service),
        Conflict (not ready)."""
        return await self.parts.commands.service_exec(self.id, service, command, timeout_s)

    def service_plan(self, service: str) -> ServicePlan:
        """How a service was configured (user, database, port). Raises NotFound (no such service)."""
        plan = next((p for p in self.runtime.plans if p.name == service), None)
        if plan is None:
            raise NotFound("service", service, f"sandbox '{self.id}' has no service '{service}'")
        return plan

    async def mock_requests(self, service: str) -> list[dict[str, Any]]:
        """An http_mock's recorded requests. Raises NotFound (no such service), InvalidRequest (not
        an http_mock), commands.MockRecordUnreadable (the record is not a regular file or over its cap)."""
        return await self.parts.commands.mock_requests(self.id, service)

    async def stop_leftovers(self) -> int:
        """Kill every process the agent left and end its database sessions; how many were killed.
        Raises RuntimeError (some could not be stopped), NotFound/Conflict (not live)."""
        return await self.parts.commands.stop_agent_leftovers(self.id)

    async def allow_agent_sessions(self) -> None:
        """Undo `stop_leftovers`' database lock before another agent runs. Raises NotFound/Conflict."""
        await self.parts.commands.allow_agent_sessions(self.id)

    # --- the workspace -------------------------------------------------------------------------

    async def read_file(self, rel: str, limit: int | None = None) -> bytes:
        """A workspace file's bytes (at most `limit`), opened without following links. Raises
        workspace.FileMissing or FileNotFoundError (absent), workspace.NotRegularFile, workspace.PathError
        (a link on the way, or not a workspace path)."""
        return await self.parts.workspaces.read(self.workspace, ws.normalize(rel), limit)

    async def lstat(self, rel: str) -> os.stat_result | None:
        """The path's own status (None: absent). Raises workspace.PathError (a link on the way)."""
        return await self.parts.workspaces.lstat(self.workspace, ws.normalize(rel))

    async def write_reserved(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """`/workspace/.svc/<name>`, the daemon's own file, replaced atomically without following a
        link. Raises workspace.PathError (the agent turned `.svc` into a link), OSError."""
        await self.parts.workspaces.replace(self.workspace, f"{ws.RESERVED}/{name}", data, mode)

    async def manifest(self) -> list[dict[str, Any]]:
        """Every workspace file (path, size, digest, mode). Raises OSError."""
        return await self.parts.workspaces.manifest(self.workspace)

    async def archive(self, target: Path) -> None:
        """The workspace as a gzipped tar at `target` (a host path). Raises OSError."""
        await self.parts.workspaces.archive(self.workspace, target)

    async def workspace_limit(self) -> dict[str, Any] | None:
        """After one more check: the `warning` details once the workspace hit `resources.disk`."""
        return await self.parts.files.workspace_limit(self.id)

    # --- evidence ------------------------------------------------------------------------------

    def audit(self) -> AuditLog:
        """The authoritative audit log (audit.py). Raises NotFound once the sandbox is gone."""
        if self.runtime.audit is None:
            raise NotFound("sandbox", self.id, f"sandbox '{self.id}' has no audit log")
        return self.runtime.audit

    async def flush_audit(self) -> None:
        """Record now what the proxies, the databases and the file watcher reported so far. Raises
        what their readers raise (OSError, the engine's errors)."""
        await flush_audit(self.runtime)

    def secret_values(self) -> dict[str, str]:
        """The resolved secrets (memory only: for redaction; never log them)."""
        return dict(self.runtime.secrets)

    async def writable_layer_size(self) -> int | None:
        """Bytes the agent container wrote outside its mounts; None when the engine cannot tell.
        Raises the engine's errors (RuntimeUnavailable)."""
        measure = getattr(self.parts.driver, "writable_layer_size", None)
        agent = self.runtime.agent
        if measure is None or agent is None:
            return None
        return int(await measure(agent.id))

    async def container_changes(self) -> list[dict[str, Any]] | None:
        """The engine's filesystem diff of the agent container ({Path, Kind}); None when the engine
        has none. Raises the engine's errors."""
        read = getattr(self.parts.driver, "container_changes", None)
        agent = self.runtime.agent
        if read is None or agent is None:
            return None
        return list(await read(agent.id))

    # --- containers of its own -----------------------------------------------------------------

    async def run_container(self, spec: ContainerSpec, *, timeout_s: float) -> ContainerExit:
        """Start `spec` (its image pulled when missing) labelled as part of this sandbox, and wait
        until it exits or `timeout_s` passed (then it is left running: `remove_container` stops it).
        Its output stays readable with `logs` until `remove_container`. Raises the engine's errors
        (ImageUnavailable, RuntimeUnavailable)."""
        await self.parts.driver.ensure_image(spec.image)
        started = time.monotonic()
        info: ContainerInfo = await self.parts.run_aux_container(self.runtime, spec, False)
        timed_out = False
        state: dict[str, Any] | None = None
        while True:
            state = await self.parts.driver.container_state(info.id)
            if state is None or not state.get("Running"):
                break
            if time.monotonic() - started > timeout_s:
                timed_out = True
                break
            await asyncio.sleep(CONTAINER_POLL_S)
        exit_code = None if timed_out or state is None else state.get("ExitCode")
        return ContainerExit(info.id, exit_code, timed_out, bool(state and state.get("OOMKilled")),
                             int((time.monotonic() - started) * 1000))

    async def logs(self, container_id: str, keep_bytes: int) -> tuple[bytes, bytes]:
        """The last `keep_bytes` of a container's stdout and stderr, read from the engine that runs
        it (a swarm node's, not the manager's). Raises the engine's errors."""
        out, err = await asyncio.gather(self.parts.driver.output(container_id, "stdout", keep_bytes),
                                        self.parts.driver.output(container_id, "stderr", keep_bytes))
        return out, err

    async def remove_container(self, container_id: str) -> None:
        """Stop and remove a container `run_container` started. Raises the engine's errors."""
        await self.parts.driver.remove_container(container_id)
