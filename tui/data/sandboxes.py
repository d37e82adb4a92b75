"""Sandbox rows and spec validation issues."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui.data.common import as_float, as_int

if TYPE_CHECKING:
    from daemon.contract.sandboxes import Sandbox


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
    node: str = ""  # where its agent runs: a swarm node's hostname, `local` on the daemon's own engine

    @classmethod
    def of(cls, sandbox: Sandbox) -> "SandboxRow":
        error = f"{sandbox.error.step or ''}: {sandbox.error.message or ''}" if sandbox.error else ""
        resources = sandbox.resources  # the sandbox's limits: {cpus, memory, pids, disk, timeout}
        return cls(
            id=sandbox.id,
            state=sandbox.state,
            spec_id=sandbox.spec_id or "",
            image=sandbox.image or "",
            created_at=sandbox.created_at,
            cpu_percent=None,  # the contract's Sandbox carries no live usage
            memory_bytes=None,
            error=error,
            cpu_limit=as_float(resources.get("cpus")),
            memory_limit=as_float(resources.get("memory")),
            node=sandbox.node or "",
        )


@dataclass
class SpecIssueRow:
    line: int | None
    loc: str
    msg: str


def spec_issues(details: Any) -> list[SpecIssueRow]:
    """Issues from a 400 `invalid_request` details object `{errors: [{loc, line, msg}]}`."""
    errors = details.get("errors") if isinstance(details, dict) else None
    return [SpecIssueRow(as_int(e.get("line")), str(e.get("loc", "")), str(e.get("msg", ""))) for e in errors or [] if isinstance(e, dict)]
