"""The per-sandbox audit log (SPEC "Audit event").

`AuditLog.record(type, details)` stamps and redacts one event `{ts, sandbox_id, type, details}`
(`type` one of `AUDIT_TYPES`) and

1. appends it as one JSON line to the sandbox's evidence file, `<SERVICE_HOME>/sandbox-evidence/
   <sandbox id>/audit.jsonl`: a daemon-only directory (0700) that no container mounts. This copy is
   the authoritative one: scoring, forbidden rules, the trajectory, run records, the `audit_log`
   export and `GET .../files/.svc/audit.jsonl` all read it, by event sequence number
   (`mark()` / `events(since)`), never by re-reading the workspace;
2. appends the same line to `/workspace/.svc/audit.jsonl`, a convenience copy for the agent and
   for people looking at the workspace. The daemon never reads it back. It is opened relative to
   the workspace root without following any link (`workspace.open_under`), and when the agent has
   removed, replaced or truncated it the write is skipped or starts a new file: the run goes on,
   and the first time the daemon notices that the copy is not what it wrote it records a
   `warning` event of kind `audit_copy_tampered`;
3. publishes it on the sandbox lifecycle stream as `{"event_type": "audit", "data": event}`.

The spec's `audit` switches (all off by default) decide what is *shown*: an event whose switch is
off (`SWITCHES`; set by the boot, `apply_switches`) is still written to the evidence file, since
scoring and forbidden rules need it (e.g. `secrets_in_logs` reads `process_spawn`), but it is
neither copied to the workspace, nor published on the lifecycle stream, nor served as
`.svc/audit.jsonl` (`raw`), nor put in the trajectory (`visible`). `warning` has no switch.

Issue 3 writes `process_spawn` (commands) and `warning` (limits); the egress proxy, the postgres
services' db audit (`db_audit.py`) and the file watcher (issue 4) write `http_call`, `db_write`,
`file_write` and `stdout` through the same object (`manager.audit_log(sandbox_id)`). Values of the sandbox's secrets are replaced by `***` in
everything written here. When the evidence file cannot be written (the daemon's disk) or has
reached `MAX_BYTES` (512 MiB, so an agent cannot fill the daemon's disk through it), `lost` counts
the events that are missing from it and the runner ends the run with an error verdict
(`audit_incomplete`) rather than score on incomplete evidence.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from daemon.util import now_iso

if TYPE_CHECKING:
    from daemon.spec.blocks import Audit

log = logging.getLogger("svcd.sandbox.audit")

AUDIT_TYPES = ("file_write", "db_write", "http_call", "process_spawn", "stdout", "warning")
# spec `audit.<switch>` -> the event type it shows
SWITCHES = {"process_spawns": "process_spawn", "stdout_capture": "stdout", "http_calls": "http_call",
            "db_writes": "db_write", "file_system": "file_write"}


def hidden_types(audit_block: Audit | None) -> set[str]:
    """The event types whose switch is off in a spec's `audit` block (None: no spec, all shown)."""
    if audit_block is None:
        return set()
    return {type_ for switch, type_ in SWITCHES.items() if not getattr(audit_block, switch, None)}
STDOUT_CHUNK = 4096


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every (non-trivial) secret value replaced by `***`."""
    for value in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def redact_obj(value: object, secrets: Iterable[str]) -> Any:
    secrets = list(secrets)
    if not secrets:
        return value
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: redact_obj(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v, secrets) for v in value]
    return value


class AuditLog:
    """Append-only audit log of one sandbox. Thread-safe; `record` is cheap enough to call on the
    event loop (two small appends)."""

    COPY = ".svc/audit.jsonl"
    MAX_BYTES = 512 * 1024**2  # per sandbox, on the daemon's disk: past it events are lost (and counted)

    def __init__(self, sandbox_id: str, path: Path, publish: Callable[[dict[str, Any]], None],
                 secrets: Callable[[], Iterable[str]] = lambda: (), workspace: Path | None = None):
        """`path`: the evidence file (daemon-only); `workspace`: the host workspace root that gets
        the convenience copy at `.svc/audit.jsonl` (None: no copy)."""
        self.sandbox_id = sandbox_id
        self.path = path
        self.workspace = workspace
        self._publish = publish
        self._secrets = secrets
        self._lock = threading.Lock()
        self.count = 0  # events recorded
        self.lost = 0  # events the evidence file is missing (write errors)
        self.error: str | None = None
        self._offsets: list[int] = []  # byte offset in the evidence file where event i starts
        self._size = 0  # bytes of complete lines in the evidence file
        self._copy_size: int | None = 0  # what the workspace copy should hold (None: unknown)
        self._copy_problem: str | None = None
        self._tamper_reported = False
        self.hidden: frozenset[str] = frozenset()  # types kept in the evidence only (switch off)

    def apply_switches(self, audit_block: Audit | None) -> None:
        """Honour a spec's `audit` switches from now on (see the module docstring)."""
        self.hidden = frozenset(hidden_types(audit_block))

    def visible(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`events` without the ones whose switch is off (what the trajectory shows)."""
        hidden = self.hidden
        return [e for e in events if e.get("type") not in hidden] if hidden else events

    @property
    def copy_path(self) -> Path | None:
        return self.workspace / self.COPY if self.workspace is not None else None

    def record(self, type: str, details: dict[str, Any], ts: str | None = None) -> dict[str, Any]:
        """`ts`: when it happened, if not now (events the egress proxy or a database wrote a moment ago)."""
        if type not in AUDIT_TYPES:
            raise ValueError(f"unknown audit event type {type!r} (expected one of {', '.join(AUDIT_TYPES)})")
        from daemon.sandbox.redact import redact_value

        event = {"ts": ts or now_iso(), "sandbox_id": self.sandbox_id, "type": type,
                 "details": redact_value(details, self._secrets())}
        data = (json.dumps(event, separators=(",", ":"), default=str) + "\n").encode()
        shown = type not in self.hidden
        with self._lock:
            self._append_evidence(data)
            tampered = self._append_copy(data) if shown else self._check_copy()
            self.count += 1
        if shown:
            self._publish({"event_type": "audit", "data": event})
        if tampered is not None and not self._tamper_reported:
            self._tamper_reported = True
            self.record("warning", {
                "kind": "audit_copy_tampered", "path": "/workspace/" + self.COPY, "detail": tampered,
                "message": "/workspace/.svc/audit.jsonl is not what the daemon wrote (removed, truncated, replaced or "
                           "appended to inside the sandbox); the daemon's own copy of the audit log is the one scored",
            })
        return event

    def mark_incomplete(self, reason: str) -> None:
        """Something the audit should have seen cannot be (a watch that could not be added): the
        run is then not scored on this evidence (the runner's `audit_incomplete`)."""
        self.lost += 1
        if self.error is None:
            self.error = reason

    # --- the evidence file (authoritative) -----------------------------------------------------

    def _append_evidence(self, data: bytes) -> None:
        if self._size + len(data) > self.MAX_BYTES:
            self.lost += 1
            if self.error is None:
                log.error("audit evidence of %s reached its cap of %d bytes: further events are dropped",
                          self.sandbox_id, self.MAX_BYTES)
            self.error = f"the audit log reached its cap of {self.MAX_BYTES} bytes"
            return
        try:
            if not self._offsets and self._size == 0:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                if os.fstat(fd).st_size != self._size:  # a failed write left a partial line: drop it
                    os.ftruncate(fd, self._size)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            self.lost += 1
            if self.error is None:
                log.error("cannot write the audit evidence of %s (%s): %s", self.sandbox_id, self.path, exc)
            self.error = f"{type(exc).__name__}: {exc}"
            return
        self._offsets.append(self._size)
        self._size += len(data)

    def mark(self) -> int:
        """The sequence number of the last event recorded so far (0: none): `events(since=mark())`
        later returns exactly the events recorded after this call."""
        with self._lock:
            return len(self._offsets)

    def events(self, since: int = 0) -> list[dict[str, Any]]:
        """The events recorded after sequence number `since`, from the evidence file."""
        with self._lock:
            if since >= len(self._offsets):
                return []
            start, end = self._offsets[max(0, since)], self._size
        try:
            with open(self.path, "rb") as fh:
                fh.seek(start)
                data = fh.read(end - start)
        except OSError as exc:
            log.error("cannot read the audit evidence of %s: %s", self.sandbox_id, exc)
            return []
        out = []
        for line in data.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def read(self) -> list[dict[str, Any]]:
        return self.events(0)

    def raw(self) -> bytes:
        """The evidence file's complete lines of the shown types (what `GET .../files/.svc/audit.jsonl`
        serves)."""
        with self._lock:
            end = self._size
        if end == 0:
            return b""
        with open(self.path, "rb") as fh:
            data = fh.read(end)
        if not self.hidden:
            return data
        return b"".join(line for line in data.splitlines(keepends=True) if self._shown_line(line))

    def _shown_line(self, line: bytes) -> bool:
        try:
            return json.loads(line).get("type") not in self.hidden
        except (ValueError, AttributeError):
            return False

    # --- the workspace copy (convenience, never read back) -------------------------------------

    def _append_copy(self, data: bytes) -> str | None:
        """Append to /workspace/.svc/audit.jsonl; never raises. Returns what looked tampered with."""
        if self.workspace is None:
            return None
        from daemon.sandbox import workspace as ws

        tampered = None
        try:
            fd = ws.open_under(str(self.workspace), self.COPY, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644,
                               create_dirs=True)
        except (OSError, ws.PathError) as exc:
            self._copy_failed(f"cannot open it: {exc}")
            self._copy_size = None
            return f"cannot open it: {exc}" if isinstance(exc, ws.PathError) else None
        try:
            size = os.fstat(fd).st_size
            if self._copy_size is not None and size != self._copy_size:
                tampered = f"expected {self._copy_size} bytes, found {size}"
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            self._copy_size = size + len(data)
            self._copy_problem = None
        except OSError as exc:  # e.g. the workspace is full: the copy misses this event
            self._copy_failed(f"cannot write it: {exc}")
            self._copy_size = None
        finally:
            os.close(fd)
        return tampered

    def _check_copy(self) -> str | None:
        """For an event the copy does not get (its switch is off): is the copy still what was
        written? Never raises, never writes."""
        if self.workspace is None or not self._copy_size:
            return None
        from daemon.sandbox import workspace as ws

        try:
            fd = ws.open_under(str(self.workspace), self.COPY, os.O_RDONLY, 0)
        except ws.PathError as exc:
            return f"cannot open it: {exc}"
        except FileNotFoundError:
            self._copy_size = 0
            return "removed"
        except OSError:
            return None
        try:
            size = os.fstat(fd).st_size
        except OSError:
            return None
        finally:
            os.close(fd)
        return f"expected {self._copy_size} bytes, found {size}" if size != self._copy_size else None

    def _copy_failed(self, problem: str) -> None:
        if self._copy_problem is None:
            log.warning("audit copy /workspace/.svc/audit.jsonl of %s skipped: %s (the daemon's own copy is complete)",
                        self.sandbox_id, problem)
        self._copy_problem = problem


# --- the egress proxy's audit files -> AuditLog -------------------------------------------------------

TAIL_INTERVAL_S = 0.1


class AuditTailer:
    """Reads the JSON lines the egress proxy appends under `directory` and records each one in the
    sandbox's AuditLog (keeping the proxy's timestamp)."""

    def __init__(self, directory: Path, record: Callable[[str, dict[str, Any], str | None], object]):
        self.directory = directory
        self.record = record
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.task: asyncio.Task[None] | None = None
        self.count = 0

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                self.poll()
            except Exception:
                log.exception("audit tail of %s failed", self.directory)
            await asyncio.sleep(TAIL_INTERVAL_S)

    def poll(self) -> int:
        n = 0
        try:
            files = sorted(self.directory.glob("*.jsonl"))
        except OSError:
            return 0
        for path in files:
            offset = self.offsets.get(path, 0)
            try:
                size = path.stat().st_size
                if size <= offset:
                    continue
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read(min(size - offset, 4 * 1024 * 1024))
            except OSError:
                continue
            self.offsets[path] = offset + len(data)
            data = self.partial.pop(path, b"") + data
            lines = data.split(b"\n")
            if lines[-1]:
                self.partial[path] = lines[-1]
            for line in lines[:-1]:
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                    self.record(event["type"], event.get("details") or {}, event.get("ts"))
                    n += 1
                except Exception as exc:
                    log.warning("bad audit line from %s: %s", path.name, exc)
        self.count += n
        return n

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except BaseException:
                pass
        try:
            self.poll()
        except Exception:
            pass
