"""Sandbox rows and spec validation issues."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tui.data.common import as_float, as_int, pick


@dataclass
class SandboxRow:
    id: str
    state: str
    spec_id: str
    image: str
    created_at: str | None
    cpu_percent: float | None
    memory_bytes: float | None
    error: str
    cpu_limit: float | None = None
    memory_limit: float | None = None

    @classmethod
    def parse(cls, raw: dict) -> "SandboxRow":
        error = raw.get("error")
        if isinstance(error, dict):
            error = f"{error.get('step', '')}: {error.get('message', '')}"
        return cls(
            id=str(raw.get("id", "?")),
            state=str(pick(raw, "state", "status", default="?")),
            spec_id=str(pick(raw, "spec_id", default="") or ""),
            image=str(pick(raw, "image", default="") or ""),
            created_at=raw.get("created_at"),
            cpu_percent=as_float(pick(raw, "stats.cpu_percent", "cpu_percent", "usage.cpu_percent", "resources.cpu_percent")),
            memory_bytes=as_float(pick(raw, "stats.memory_bytes", "memory_bytes", "usage.memory_bytes", "stats.mem_bytes")),
            error=str(error or ""),
            cpu_limit=as_float(pick(raw, "resources.cpus", "resources.cpu")),
            memory_limit=as_float(pick(raw, "resources.memory", "resources.memory_bytes")),
        )


@dataclass


@dataclass
class SpecIssueRow:
    line: int | None
    loc: str
    msg: str


def spec_issues(details: Any) -> list[SpecIssueRow]:
    """Issues from a 400 `invalid_request` details object `{errors: [{loc, line, msg}]}`."""
    errors = details.get("errors") if isinstance(details, dict) else None
    return [SpecIssueRow(as_int(e.get("line")), str(e.get("loc", "")), str(e.get("msg", ""))) for e in errors or [] if isinstance(e, dict)]
