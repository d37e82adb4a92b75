"""Audit events, workspace diffs, and where the event that broke a forbidden rule is shown."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui.data.common import AUDIT_TYPES, as_int
from tui.data.scenarios import Violation

if TYPE_CHECKING:
    from daemon.contract.sandboxes import WorkspaceDiff


# --- audit ------------------------------------------------------------------------------------------


@dataclass
class AuditRow:
    index: int
    ts: str | None
    type: str
    summary: str
    details: dict

    @property
    def is_warning(self) -> bool:
        return self.type == "warning"

    @classmethod
    def parse(cls, raw: dict, index: int) -> "AuditRow":
        kind = str(raw.get("type") or "?")  # an audit log line: {ts, sandbox_id, type, details}
        details = raw.get("details") if isinstance(raw.get("details"), dict) else {k: v for k, v in raw.items() if k not in ("ts", "type", "sandbox_id")}
        return cls(index=as_int(raw.get("index")) if raw.get("index") is not None else index, ts=raw.get("ts"),
                   type=kind, summary=audit_summary(kind, details), details=details)


AGENT_OUTPUT_LINES = 500


def agent_output_rows(agent: dict | None, start: int) -> list[AuditRow]:
    """The agent's own stdout and stderr (the trajectory's `agent` block) as `stdout` rows, the last
    AGENT_OUTPUT_LINES lines of each, for a run whose audit log has no stdout events of its own."""
    rows: list[AuditRow] = []
    for stream in ("stdout", "stderr"):
        text = (agent or {}).get(stream)
        if not isinstance(text, str) or not text.strip():
            continue
        for line in text.splitlines()[-AGENT_OUTPUT_LINES:]:
            rows.append(AuditRow(index=start + len(rows), ts=None, type="stdout",
                                 summary=f"{'agent' if stream == 'stdout' else 'agent stderr'}: {line}", details={"stream": stream}))
    return rows


def audit_summary(kind: str, d: dict) -> str:
    if kind == "http_call":
        return f"{d.get('method', '?')} {d.get('host', '')}{d.get('path', '')} → {d.get('status', '?')}"
    if kind == "db_write":
        return f"{d.get('operation', '?')} {d.get('service', '')}.{d.get('table', '?')} ({d.get('row_count', '?')} rows)"
    if kind == "process_spawn":
        return f"{d.get('command', '?')} → exit {d.get('exit_code', '?')}"
    if kind in ("file_write", "file_delete", "file_read"):
        return f"{d.get('op', d.get('action', ''))} {d.get('path', '?')}".strip()
    if kind == "stdout":
        return str(d.get("data", d.get("text", d.get("chunk", ""))))
    return str(d.get("message", d.get("msg", json.dumps(d)[:200])))


def violation_target(violation: Violation, audit: list[AuditRow], diff: list["DiffEntry"], span_ids: set[str]) -> tuple[str, Any] | None:
    """Where the event that broke a forbidden rule is shown: ("audit", position in `audit`),
    ("diff", path) for workspace/container changes, or ("span", span_id) for trace events."""
    position = violated_index(violation, audit)
    if position is not None:
        return ("audit", position)
    event = violation.event or {}
    if event.get("span_id") and str(event["span_id"]) in span_ids:
        return ("span", str(event["span_id"]))
    details = event.get("details") if isinstance(event.get("details"), dict) else {}
    path = event.get("path") or details.get("path")
    if path:
        for entry in diff:
            if entry.path == path or "/workspace/" + entry.path.lstrip("/") == path:
                return ("diff", entry.path)
    return None


def event_summary(event: dict | None) -> str:
    """A violation's event in one line, whatever its source (audit, workspace, trace)."""
    if not event:
        return ""
    if event.get("type") in AUDIT_TYPES:
        details = event.get("details") if isinstance(event.get("details"), dict) else event
        return f"{event['type']}: {audit_summary(event['type'], details)}"
    if event.get("path"):
        return f"{event.get('change', 'changed')} {event['path']}"
    if event.get("span_id"):
        return f"{event.get('event_type', 'span')} {event.get('tool', '')} ({event['span_id']})"
    return json.dumps(event, default=str)[:200]


def violated_index(violation: Violation, audit: list[AuditRow]) -> int | None:
    """The position in `audit` of the event that broke a forbidden rule."""
    if violation.event_index is not None:
        for pos, row in enumerate(audit):
            if row.index == violation.event_index:
                return pos
    if violation.event and violation.event.get("ts"):
        ts, kind = violation.event.get("ts"), violation.event.get("type")
        for pos, row in enumerate(audit):
            if row.ts == ts and (kind is None or row.type == kind):
                return pos
    return None


@dataclass
class DiffEntry:
    change: str  # "+" added, "~" modified, "-" deleted
    path: str
    size: int | None


def diff_entries(raw: WorkspaceDiff | list) -> list[DiffEntry]:
    """From `GET /sandboxes/{id}/diff` (WorkspaceDiff: added, modified, deleted) or a trajectory's
    `workspace_changes` ([{path, change}])."""
    marks = {"added": "+", "modified": "~", "deleted": "-"}
    if isinstance(raw, list):
        return [DiffEntry(marks.get(str(e.get("change")), "~"), str(e.get("path", "?")), as_int(e.get("size")))
                for e in raw if isinstance(e, dict)]
    out = []
    for mark, entries in (("+", raw.added), ("~", raw.modified), ("-", raw.deleted)):
        for entry in entries:
            if isinstance(entry, str):
                out.append(DiffEntry(mark, entry, None))
            elif isinstance(entry, dict):
                out.append(DiffEntry(mark, str(entry.get("path", "?")), as_int(entry.get("size"))))
    return out
