"""Keeping secret values out of everything a person or another tenant can read.

Every audit event goes through `AuditLog.record`, which replaces the sandbox's secret values with
`***` (`redact_text` below: the value itself and its common encodings: URL-quoted, base64, JSON
escaped) before the event is appended to `/workspace/.svc/audit.jsonl` or published on the
lifecycle stream. The same applies to command output returned by the API and to boot error
messages.

Scoring still needs the raw output (`forbidden.secrets_in_logs` looks for secret values in the
captured stdout): `RawCapture` keeps it in a daemon-only file, `<runtime dir>/raw/stdout.jsonl`
(the sandbox runtime directory lives under `$SERVICE_HOME/sandbox-runtime/<id>/`, outside the
workspace and never mounted into a container), one JSON line `{ts, command, seq, data}` per 4 KB
chunk, read back with `RawCapture.read()` while the sandbox is alive.
"""
from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from daemon.util import now_iso, read_jsonl

MASK = "***"
MIN_SECRET_LEN = 4
CHUNK_BYTES = 4096


def variants(value: str) -> set[str]:
    """The forms a secret value takes in text: itself, URL-quoted, JSON-escaped, and base64 at
    each of the three byte alignments (the characters that encode only the value's own bytes, so
    `base64(anything + value + anything)` is caught too)."""
    out = {value, quote(value, safe=""), json.dumps(value)[1:-1]}
    raw = value.encode()
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode()
        fixed = enc[4 if k else 0:((k + len(raw)) // 3) * 4]
        if len(fixed) >= 8:
            out.add(fixed)
    return {v for v in out if len(v) >= MIN_SECRET_LEN}


def redact_text(text: str, secrets: Iterable[str]) -> str:
    forms: set[str] = set()
    for value in secrets:
        if value and len(value) >= MIN_SECRET_LEN:
            forms |= variants(value)
    for form in sorted(forms, key=len, reverse=True):
        if form in text:
            text = text.replace(form, MASK)
    return text


def redact_value(value: object, secrets: Iterable[str]) -> Any:
    secrets = [s for s in secrets if s and len(s) >= MIN_SECRET_LEN]
    if not secrets:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {k: redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, secrets) for v in value]
    return value


class Redactor:
    """`redact_text` / `redact_value` for many strings against one set of secrets: the variants are
    computed once. Dict keys are redacted too. Used on trace ingest (daemon.api.traces)."""

    def __init__(self, secrets: Iterable[str]):
        forms: set[str] = set()
        for value in secrets:
            if value and len(value) >= MIN_SECRET_LEN:
                forms |= variants(value)
        self.forms = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.forms)

    def text(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def value(self, value: object) -> Any:
        if not self.forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {(self.text(k) if isinstance(k, str) else k): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


def chunks(text: str, size: int = CHUNK_BYTES) -> list[str]:
    """`text` cut into pieces of at most `size` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    out: list[str] = []
    start = 0
    while start < len(data):
        end = min(start + size, len(data))
        while end < len(data) and end > start and (data[end] & 0xC0) == 0x80:
            end -= 1
        out.append(data[start:end].decode("utf-8", "replace"))
        start = end
    return out


class RawCapture:
    """Unredacted captured stdout of one sandbox, for scoring only (see the module docstring)."""

    def __init__(self, directory: Path):
        self.path = directory / "stdout.jsonl"
        self._lock = threading.Lock()
        self._seq = 0

    def append(self, command: str, text: str) -> None:
        if not text:
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "a") as fh:
                for piece in chunks(text):
                    self._seq += 1
                    fh.write(json.dumps({"ts": now_iso(), "command": command, "seq": self._seq, "data": piece}) + "\n")

    def read(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path)

    def text(self) -> str:
        return "".join(entry["data"] for entry in self.read())
