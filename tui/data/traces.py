"""Trace spans: the `start` and `end` events of a span merged into one row of the tree, from the
contract's TraceEvent (stored events, the lifecycle stream's `trace` events) or Span (a trace read
as its merged spans)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Union

from pydantic import ValidationError

if TYPE_CHECKING:
    from daemon.contract.traces import Span as SpanRecord
    from daemon.contract.traces import TraceEvent

TraceItem = Union["TraceEvent", "SpanRecord"]


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

    def merge(self, event: TraceItem) -> None:
        """Merge one stored event (TraceEvent, with its `phase`) or one merged span (Span, `open`)."""
        self.parent_id = event.parent_span_id or self.parent_id
        self.trace_id = event.trace_id or self.trace_id
        self.name = event.tool if event.tool is not None else self.name
        self.event_type = event.event_type or self.event_type
        phase, ts = phase_and_start(event)
        if not (self.phase in ("end", "complete") and phase == "start"):  # a late start never reopens
            self.phase = phase
        self.status = event.status or self.status
        self.ts = self.ts or ts
        self.duration_ms = float(event.duration_ms) if event.duration_ms is not None else self.duration_ms
        if event.cost is not None:
            self.model = event.cost.model or self.model
            self.input_tokens = event.cost.input_tokens or self.input_tokens
            self.output_tokens = event.cost.output_tokens or self.output_tokens
            self.cost_usd = event.cost.estimated_usd
        self.input = event.input or self.input
        self.output = event.output or self.output
        self.error_type = event.error_type or self.error_type


def phase_and_start(event: TraceItem) -> tuple[str, str]:
    """A TraceEvent's phase and time; a merged Span's phase (`start` while open) and start time."""
    from daemon.contract.traces import TraceEvent

    if isinstance(event, TraceEvent):
        return event.phase, event.ts
    return ("start" if event.open else "end"), event.started_at


def event_time(event: TraceItem) -> str:
    return phase_and_start(event)[1]


def event_key(event: TraceItem) -> str:
    """What identifies one event across the ways the TUI receives it (list, stream, trajectory)."""
    from daemon.contract.traces import TraceEvent

    return event.id if isinstance(event, TraceEvent) else f"span:{event.span_id}:{event.open}"


def trace_events(raw: Iterable[Any]) -> list[TraceEvent]:
    """The trace events of a trajectory blob (each the contract's TraceEvent); others are skipped."""
    from daemon.contract.traces import TraceEvent

    out = []
    for item in raw:
        try:
            out.append(TraceEvent.model_validate(item))
        except ValidationError:
            continue
    return out
