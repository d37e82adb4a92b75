"""Trace spans: the `start` and `end` events of a span merged into one row of the tree."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tui.data.common import as_float, as_int


# --- traces -----------------------------------------------------------------------------------------


@dataclass
class Span:
    """One span of a trace tree: the `start` and `end` events of one span_id merged."""

    span_id: str
    parent_id: str = ""
    trace_id: str = ""
    name: str = "?"
    event_type: str = ""
    status: str = ""
    phase: str = ""
    ts: str | None = None
    duration_ms: float | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    input: str | None = None
    output: str | None = None
    error_type: str | None = None

    @property
    def is_error(self) -> bool:
        return self.status == "error" or bool(self.error_type)

    @property
    def open(self) -> bool:
        return self.phase == "start"

    def merge(self, event: dict) -> None:
        """Merge one stored trace event (contract TraceEvent: `phase`) or one merged span (contract
        Span: `open`), as the JSON the daemon sends."""
        cost = event.get("cost") if isinstance(event.get("cost"), dict) else {}
        self.parent_id = str(_given(event, "parent_span_id", self.parent_id) or "")
        self.trace_id = str(_given(event, "trace_id", self.trace_id) or "")
        self.name = str(_given(event, "tool", self.name))
        self.event_type = str(_given(event, "event_type", self.event_type))
        phase = str(event.get("phase") or "")
        if not phase and "open" in event:
            phase = "start" if event.get("open") else "end"
        if phase and not (self.phase in ("end", "complete") and phase == "start"):
            self.phase = phase
        self.status = str(event.get("status") or self.status)
        self.ts = self.ts or event.get("ts") or event.get("started_at")
        self.duration_ms = as_float(event.get("duration_ms")) if event.get("duration_ms") is not None else self.duration_ms
        self.model = cost.get("model") or self.model
        self.input_tokens = as_int(cost.get("input_tokens")) or self.input_tokens
        self.output_tokens = as_int(cost.get("output_tokens")) or self.output_tokens
        usd = as_float(cost.get("estimated_usd"))
        self.cost_usd = usd if usd is not None else self.cost_usd
        self.input = _text(event.get("input")) or self.input
        self.output = _text(event.get("output")) or self.output
        self.error_type = event.get("error_type") or self.error_type


def _given(event: dict, key: str, current: Any) -> Any:
    return current if event.get(key) is None else event[key]


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value)


def span_id_of(event: dict) -> str:
    return str(event.get("span_id") or "")
