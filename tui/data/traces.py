"""Trace spans: the `start` and `end` events of a span merged into one row of the tree."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tui.data.common import as_float, as_int, pick


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
        cost = event.get("cost") if isinstance(event.get("cost"), dict) else {}
        self.parent_id = str(pick(event, "parent_span_id", "parent_id", default=self.parent_id) or "")
        self.trace_id = str(pick(event, "trace_id", default=self.trace_id) or "")
        self.name = str(pick(event, "tool", "name", default=self.name))
        self.event_type = str(pick(event, "event_type", "type", default=self.event_type))
        phase = str(event.get("phase") or "")
        if not phase and "open" in event:
            phase = "start" if event.get("open") else "end"
        if phase and not (self.phase in ("end", "complete") and phase == "start"):
            self.phase = phase
        self.status = str(event.get("status") or self.status)
        self.ts = self.ts or event.get("ts") or event.get("started_at")
        self.duration_ms = as_float(event.get("duration_ms")) if event.get("duration_ms") is not None else self.duration_ms
        self.model = pick(cost, "model") or pick(event, "model") or self.model
        self.input_tokens = as_int(pick(cost, "input_tokens")) or self.input_tokens
        self.output_tokens = as_int(pick(cost, "output_tokens")) or self.output_tokens
        usd = as_float(pick(cost, "estimated_usd", "usd"))
        self.cost_usd = usd if usd is not None else self.cost_usd
        self.input = _text(event.get("input")) or self.input
        self.output = _text(event.get("output")) or self.output
        self.error_type = event.get("error_type") or self.error_type


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value)


def span_id_of(event: dict) -> str:
    return str(pick(event, "span_id", "id", default=""))
