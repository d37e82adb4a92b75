"""Commands in a sandbox: `exec` in the agent container (wrapped in `timeout -k`, audited as
`process_spawn`, published as `command` on the lifecycle stream), `service_exec` in a backing
service's container, and an http_mock's recorded requests: `SandboxCommands`, a part of
`SandboxManager` sharing its registry of live sandboxes."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from daemon.errors import Conflict, InvalidRequest, NotFound
from daemon.sandbox.engine import RawExec, SandboxDriver
from daemon.sandbox.leftovers import REAPER_SH, parse_reaper_output
from daemon.contract.sandboxes import LIVE_STATES
from daemon.sandbox.models import DEFAULT_COMMAND_TIMEOUT_S, ExecResult, command_text
from daemon.sandbox.redact import RawCapture, chunks
from daemon.sandbox.runtime import LiveSandboxes, SandboxEvents, SandboxRuntime, size_text
from daemon.sandbox import toolset
from daemon.sandbox import workspace as ws
from daemon.sandbox.services import MOCK_RECORD_FILE, mock_record_on_host
from daemon.store import sandboxes as sandbox_store
from daemon.util import parse_jsonl

if TYPE_CHECKING:
    from daemon.store.db import Store

TIMEOUT_GRACE_S = 2
MOCK_RECORD_CAP = 16 * 1024 * 1024  # as programs/http_mock.py MAX_RECORD_BYTES


class MockRecordUnreadable(RuntimeError):
    """A mock's request record is not a regular file, or is over its cap: the check errs."""


def nothing_left(sb: SandboxRuntime, processes: int | None) -> bool:
    """Whether the agent container runs only its docker-init and the keep-alive, as the host's cgroup
    (on a swarm, the node's engine, from its cgroup there) counts them: the reaper's exec is then
    skipped. The keep-alive is docker-init's one child, and either ending ends the container, so
    exactly two processes are those two; fewer means the container is ending, which the reaper's path
    reports (`agent_stopped_container`). An image whose own ENTRYPOINT starts the container
    (base.build.image_entrypoint) always gets the reaper."""
    spec = sb.agent_spec
    plain = spec is not None and spec.init and spec.entrypoint == toolset.KEEP_ALIVE
    return plain and processes == 2


class SandboxCommands:
    """Commands in live sandboxes. `check_workspace_size` (the workspace files' check) runs after
    every command."""

    def __init__(self, driver: SandboxDriver, store: Store, events: SandboxEvents, live: LiveSandboxes,
                 check_workspace_size: Callable[[SandboxRuntime], Coroutine[Any, Any, None]]):
        self.driver = driver
        self.store = store
        self.events = events
        self.live = live
        self.check_workspace_size = check_workspace_size

    async def exec(self, sandbox_id: str, command: str | list[str], *, timeout_s: float | None = None,
                   env: dict[str, str] | None = None, workdir: str = "/workspace", background: bool = False,
                   user: str | None = None, record: bool = True) -> ExecResult:
        if not command:
            raise InvalidRequest("command must not be empty")
        sb = await self.live.require_ready(sandbox_id)
        remaining = max(1.0, sb.expires - time.time())
        limit = min(timeout_s or DEFAULT_COMMAND_TIMEOUT_S, remaining)
        return await self.run_command(sb, command, timeout_s=limit, env=env, workdir=workdir, user=user,
                                      background=background, record=record, transition=True)

    async def run_command(self, sb: SandboxRuntime, command: str | list[str], *, timeout_s: float, env: dict[str, str] | None,
                   workdir: str, user: str | None, background: bool, record: bool, transition: bool,
                   trusted: bool = False, container: str | None = None) -> ExecResult:
        """`trusted`: a command the daemon runs on its own behalf (a check): its shell and timeout are
        the toolset's (toolset.py), never programs of the agent's container; `container` runs it in
        another container of the sandbox (a clean verifier)."""
        if trusted:
            argv = [toolset.SH, "-c", command] if isinstance(command, str) else [str(a) for a in command]
            wrapped = [toolset.tool("timeout"), "-k", str(TIMEOUT_GRACE_S), f"{timeout_s:g}", *argv]
        else:
            argv = ["sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
            wrapped = ["timeout", "-k", str(TIMEOUT_GRACE_S), f"{timeout_s:g}", *argv]
        text = command_text(command)
        if transition and sb.state == "ready":
            sb.state = "running"
            await sandbox_store.update(self.store, sb.id, state="running")
            self.events.status(sb, state="running")
        assert sb.agent is not None
        try:
            raw = await self.driver.exec(container or sb.agent.id, wrapped, env={**sb.run_env, **sb.secrets, **(env or {})}, workdir=workdir, user=user,
                                         detach=background, watchdog_s=None if background else timeout_s + TIMEOUT_GRACE_S + 10)
        except Exception:
            if sb.id not in self.live or sb.state not in LIVE_STATES:
                raise Conflict(f"sandbox '{sb.id}' was stopped while the command ran", "stopped")
            raise
        if raw.exit_code is None and not background and (sb.id not in self.live or sb.state not in LIVE_STATES):
            raise Conflict(f"sandbox '{sb.id}' was stopped while the command ran", "stopped")
        result = await self._result(sb, text, raw, timeout_s, background, trusted)
        self.events.publish(sb.id, "command", {"command": text, "exit_code": result.exit_code, "duration_ms": result.duration_ms,
                                         **({"timed_out": True} if result.timed_out else {}),
                                         **({"oom_killed": True} if result.oom_killed else {}),
                                         **({"background": True} if background else {})})
        if record and sb.audit is not None:
            details: dict[str, Any] = {"command": text, "exit_code": result.exit_code, "duration_ms": result.duration_ms,
                                       "output_bytes": len(raw.stdout) + len(raw.stderr) + raw.stdout_dropped + raw.stderr_dropped}
            if background:
                details["background"] = True
            if result.timed_out:
                details["timed_out"] = True
            if result.oom_killed:
                details["oom_killed"] = True
            if self._stdout_capture(sb) and not background:
                pieces = chunks(result.stdout)
                details["stdout"] = pieces[0] if pieces else ""
                details["stdout_chunks"] = pieces  # 4 KB each (redacted by the audit log)
                RawCapture(sb.runtime_dir / "raw").append(text, result.stdout)  # unredacted, daemon-only: scoring
            sb.audit.record("process_spawn", details)
        await self.check_workspace_size(sb)
        return result

    def _stdout_capture(self, sb: SandboxRuntime) -> bool:
        return bool(sb.spec is not None and sb.spec.audit.stdout_capture)

    async def _result(self, sb: SandboxRuntime, text: str, raw: RawExec, timeout_s: float, background: bool,
                      trusted: bool = False) -> ExecResult:
        duration_ms = int(raw.duration_s * 1000)
        if background:
            return ExecResult(text, "", "", None, duration_ms, background=True)
        stdout = raw.stdout.decode("utf-8", "replace")
        stderr = raw.stderr.decode("utf-8", "replace")
        if raw.stdout_dropped:
            stdout += f"\n[svc] output truncated: {raw.stdout_dropped} more bytes of stdout not shown\n"
        if raw.stderr_dropped:
            stderr += f"\n[svc] output truncated: {raw.stderr_dropped} more bytes of stderr not shown\n"
        code = raw.exit_code
        # GNU timeout exits 124 at its deadline; the toolset's (busybox) ends the command with SIGTERM (143)
        killed_codes = (124, 137, 143) if trusted else (124, 137)
        timed_out = raw.killed_by_watchdog or (code in killed_codes and raw.duration_s >= timeout_s - 0.05)
        oom = False
        if code == 137 and not timed_out and sb.agent is not None:
            count = await self.driver.oom_kill_count(sb.agent.id)
            if count is not None and count > sb.oom_kills:
                sb.oom_kills = count
                oom = True
        if timed_out:
            stderr += f"\n[svc] command timed out after {timeout_s:g}s and was killed\n"
        elif oom:
            stderr += (f"\n[svc] command was killed: out of memory (the sandbox's memory limit is "
                       f"{size_text(sb.limits.memory)}; raise resources.memory in the spec)\n")
        return ExecResult(text, stdout, stderr, code, duration_ms, timed_out=timed_out, oom_killed=oom,
                          engine_lost=raw.stream_broken)

    async def stop_agent_leftovers(self, sandbox_id: str) -> int:
        """Kill every process the agent left in its container (leftovers.py) and end its database
        sessions. Returns how many processes were killed; RuntimeError when some could not be."""
        sb = await self.live.require_live(sandbox_id)
        assert sb.agent is not None
        killed = 0
        if not nothing_left(sb, await self.driver.process_count(sb.agent.id)):
            raw = await self.driver.exec(sb.agent.id, [toolset.SH, "-c", REAPER_SH], env=toolset.trusted_env(), user="0",
                                         watchdog_s=60)
            killed, left = parse_reaper_output(raw.stdout.decode("utf-8", "replace"))
            if raw.exit_code != 0 or left != 0:
                raise RuntimeError(f"{max(left, 0) or 'some'} process(es) the agent left could not be stopped "
                                   f"({raw.stderr.decode('utf-8', 'replace').strip()[-200:]})")
        for reader in list(sb.db_readers):
            await reader.end_agent_sessions()
        return killed

    async def allow_agent_sessions(self, sandbox_id: str) -> None:
        """Undo `stop_agent_leftovers`' database lock before another run's agent starts."""
        sb = await self.live.require_live(sandbox_id)
        for reader in list(sb.db_readers):
            await reader.allow_agent_sessions()

    async def service_exec(self, sandbox_id: str, service: str, command: list[str], timeout_s: float = 30) -> ExecResult:
        sb = await self.live.require_ready(sandbox_id)
        info = sb.services.get(service)
        if info is None:
            raise NotFound("service", service, f"sandbox '{sandbox_id}' has no service '{service}'")
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        raw = await self.driver.exec(info.id, argv, watchdog_s=timeout_s)
        stdout = raw.stdout.decode("utf-8", "replace")
        stderr = raw.stderr.decode("utf-8", "replace")
        if raw.killed_by_watchdog:
            stderr += f"\n[svc] command timed out after {timeout_s:g}s and was killed\n"
        return ExecResult(command_text(command), stdout, stderr, raw.exit_code, int(raw.duration_s * 1000),
                          timed_out=raw.killed_by_watchdog)

    async def mock_requests(self, sandbox_id: str, service: str) -> list[dict[str, Any]]:
        sb = await self.live.require_live(sandbox_id)
        plan = next((p for p in sb.plans if p.name == service), None)
        if plan is None:
            raise NotFound("service", service, f"sandbox '{sandbox_id}' has no service '{service}'")
        if plan.type != "http_mock":
            raise InvalidRequest(f"service '{service}' is a {plan.type} service, not an http_mock")
        # Either way the bytes are the container's to choose: read without following a link,
        # only from a regular file, at most MOCK_RECORD_CAP of it.
        if mock_record_on_host(plan):
            root = str(sb.runtime_dir / "mocks" / service)
            try:
                data = await asyncio.to_thread(ws.read_file, root, "requests.jsonl", MOCK_RECORD_CAP + 1)
            except ws.FileMissing:
                data = b""
            except (OSError, ws.PathError) as exc:
                raise MockRecordUnreadable(f"the request record of mock '{service}' cannot be read: {exc}") from None
        else:
            script = f'f={MOCK_RECORD_FILE}; [ -f "$f" ] && [ ! -L "$f" ] && exec head -c {MOCK_RECORD_CAP + 1} "$f"'
            raw = await self.driver.exec(sb.services[service].id, ["sh", "-c", script], watchdog_s=30,
                                         output_cap=MOCK_RECORD_CAP + 1)
            data = raw.stdout if raw.exit_code == 0 else b""
            if raw.stdout_dropped:
                data += b"x"  # over the cap
        if len(data) > MOCK_RECORD_CAP:
            raise MockRecordUnreadable(f"the request record of mock '{service}' is over {MOCK_RECORD_CAP} bytes")
        entries = parse_jsonl(data)
        if any(isinstance(e, dict) and "svc_record_full" in e for e in entries):
            raise MockRecordUnreadable(f"mock '{service}' stopped recording at its {MOCK_RECORD_CAP}-byte cap: "
                                       "the requests after that are unknown")
        return [e for e in entries if isinstance(e, dict)]
