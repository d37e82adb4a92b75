"""The per-sandbox audit log (SPEC "Audit event").

`AuditLog.record(type, details)` appends one JSON object per line to
`<workspace>/.svc/audit.jsonl` and publishes the same event on the sandbox lifecycle stream as
`{"event_type": "audit", "data": event}`. Event: `{ts, sandbox_id, type, details}` with `type` one
of `AUDIT_TYPES`.

Issue 3 writes `process_spawn` (commands) and `warning` (limits); the egress/db proxies and the file
watcher (issue 4) write `http_call`, `db_write`, `file_write` and `stdout` through the same object
(`manager.audit_log(sandbox_id)`), so the file and the stream never disagree. Values of the
sandbox's secrets are replaced by `***` in everything written here.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from daemon.util import now_iso

log = logging.getLogger("svcd.sandbox.audit")

AUDIT_TYPES = ("file_write", "db_write", "http_call", "process_spawn", "stdout", "warning")
STDOUT_CHUNK = 4096


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every (non-trivial) secret value replaced by `***`."""
    for value in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def redact_obj(value: Any, secrets: Iterable[str]) -> Any:
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
    event loop (one small append)."""

    def __init__(self, sandbox_id: str, path: Path, publish: Callable[[dict[str, Any]], None],
                 secrets: Callable[[], Iterable[str]] = lambda: ()):
        self.sandbox_id = sandbox_id
        self.path = path
        self._publish = publish
        self._secrets = secrets
        self._lock = threading.Lock()
        self.count = 0

    def record(self, type: str, details: dict[str, Any], ts: str | None = None) -> dict[str, Any]:
        """`ts`: when it happened, if not now (events the proxies wrote a moment ago)."""
        if type not in AUDIT_TYPES:
            raise ValueError(f"unknown audit event type {type!r} (expected one of {', '.join(AUDIT_TYPES)})")
        from daemon.sandbox.redact import redact_value

        event = {"ts": ts or now_iso(), "sandbox_id": self.sandbox_id, "type": type,
                 "details": redact_value(details, self._secrets())}
        line = json.dumps(event, separators=(",", ":"), default=str)
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "a") as fh:
                    fh.write(line + "\n")
            except OSError as exc:
                log.warning("cannot write audit log of %s: %s", self.sandbox_id, exc)
            self.count += 1
        self._publish({"event_type": "audit", "data": event})
        return event

    def read(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except OSError:
            return []
        events = []
        for line in text.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events
