"""What the forbidden rules look at: the agent's slice of the audit log and trace, its captured
output, what changed in the workspace and container while it ran, and the sandbox's secrets."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CODE = "invariant_violation"


@dataclass
class TrajectoryView:
    audit_events: list[dict[str, Any]] = field(default_factory=list)
    trace_events: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    """Captured text by stream name (``stdout``, ``stderr``), raw (not redacted)."""
    secrets: dict[str, str] = field(default_factory=dict)
    workspace_changes: list[dict[str, Any]] | None = None
    """``[{path (absolute), change: added | modified | deleted}]`` from the workspace manifest diff
    around the agent run; None when unknown."""
    container_changes: list[dict[str, Any]] | None = None
    """``[{path, change}]`` outside /workspace from the container's filesystem diff; None when unknown."""
    file_audit: bool = False
    """True when the audit log records file writes (``audit.file_system`` tracks ``writes``)."""
    dns_overrides: dict[str, str] = field(default_factory=dict)


def violation(rule: str, source: str, message: str, event: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"rule": rule, "code": CODE, "source": source, "message": message, "event": event or {}}
