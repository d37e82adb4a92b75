"""Traces: the ingest body (validated per event), the documented answers and the list queries.

Trace API models: the ingest body (validated per event) and the documented response shapes.

Event types are SPEC's `llm_call`, `tool_use`, `tool_call`, plus `span` for any other traced
function or OpenTelemetry span (an agent's top-level step, an HTTP call), so tool metrics count only
real tool executions. Phases: `start` + `end` (sharing a span_id), `complete` (one event for a whole
span; the default) and `invoked` (a tool the model asked for).
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from daemon.contract.common import CURSOR_PATTERN, DEFAULT_LIMIT, MAX_LIMIT, JsonValue, Query, Response

EVENT_TYPES = ("llm_call", "tool_use", "tool_call", "span")
PHASES = ("start", "end", "complete", "invoked")
MAX_EVENTS_PER_REQUEST = 10_000
TEXT_LIMIT_BYTES = 4096
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$"
PARENT_PATTERN = r"^(?:|[A-Za-z0-9][A-Za-z0-9._:\-]{0,127})$"
MAX_COUNT = 10**15  # token counts: stored as SQLite integers
MAX_DURATION_MS = 10**12  # about 31 years

EventType = Literal["llm_call", "tool_use", "tool_call", "span"]
Phase = Literal["start", "end", "complete", "invoked"]


class CostIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(None, max_length=200)
    input_tokens: int | None = Field(None, ge=0, le=MAX_COUNT, description="all prompt tokens, cached ones included")
    output_tokens: int | None = Field(None, ge=0, le=MAX_COUNT)
    cached_tokens: int | None = Field(None, ge=0, le=MAX_COUNT, description="prompt tokens read from the provider's cache")
    reasoning_tokens: int | None = Field(None, ge=0, le=MAX_COUNT, description="output tokens spent reasoning (part of output_tokens)")
    estimated_usd: float | None = Field(None, description="ignored: the daemon prices the call from its table")
    unpriced: bool | None = Field(None, description="ignored; set by the daemon")


class TraceEventIn(BaseModel):
    """One trace event as posted. Only `event_type` is required."""

    model_config = ConfigDict(extra="forbid")
    ts: datetime | None = Field(None, description="RFC 3339 (or epoch seconds); default: time received")
    event_type: EventType
    tool: str | None = Field(None, max_length=200, description="tool name, model-call name or function name")
    phase: Phase = "complete"
    trace_id: str | None = Field(None, pattern=ID_PATTERN, description="default: the parent's trace, or a new trace for a root span")
    span_id: str | None = Field(None, pattern=ID_PATTERN, description="default: a new span_... id (required for phase end)")
    parent_span_id: str | None = Field(None, pattern=PARENT_PATTERN, description="empty or absent for a top-level span")
    root_span_id: str | None = Field(None, pattern=ID_PATTERN, description="default: resolved from the parent")
    duration_ms: float | None = Field(None, ge=0, le=MAX_DURATION_MS)
    status: Literal["ok", "error"] | None = Field(None, description="default `ok` on end and complete events")
    error_type: str | None = Field(None, max_length=200)
    cost: CostIn | None = None
    input: Any = Field(None, description="string, or any JSON value (serialised); truncated to 4 KB")
    output: Any = Field(None, description="string, or any JSON value (serialised); truncated to 4 KB")
    metadata: dict[str, Any] | None = None
    run_id: str | None = Field(None, max_length=128)
    experiment_id: str | None = Field(None, max_length=128)
    scenario_id: str | None = Field(None, max_length=128)
    agent: str | None = Field(None, max_length=200)
    agent_version: Annotated[str, Field(max_length=64)] | int | None = Field(None, description="a string (an integer is accepted)")


class TraceIngest(BaseModel):
    """`{events: [...]}`: each event is validated on its own; bad ones are reported, good ones kept."""

    events: list[TraceEventIn] = Field(max_length=MAX_EVENTS_PER_REQUEST)


class TraceIngestBody(BaseModel):
    """The ingest body as the route accepts it: `events` is a list, each item validated on its own
    against TraceEventIn; a bad one (of the wrong shape or type) is reported in the answer (`errors`,
    by index) and the others are kept, so a bad event is not a 400."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"x-event-schema": "#/components/schemas/TraceEventIn"})
    events: list[JsonValue] = Field(max_length=MAX_EVENTS_PER_REQUEST, description="each a TraceEventIn")


class IngestError(Response):
    index: int = Field(description="position of the event in `events`")
    loc: str = Field(description="field path inside the event, e.g. `events.3.cost.input_tokens`")
    msg: str


class IngestResult(Response):
    accepted: int
    rejected: int
    errors: list[IngestError]
    trace_ids: list[str] = Field(description="distinct traces the accepted events belong to")


class Cost(Response):
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    estimated_usd: float | None = Field(None, description="null when the call cannot be priced (unknown, not free)")
    unpriced: bool | None = Field(None, description="true when the call has no price: no token counts, or a model not in the pricing table")
    unpriced_reason: str | None = Field(None, description="no token counts | no model | model not in the pricing table")
    priced_as: str | None = Field(None, description="the pricing-table entry used")


class Stamps(Response):
    """What an event belongs to, so every list filter works (set by the runner or the ingest route)."""

    sandbox_id: str | None = None
    run_id: str | None = None
    experiment_id: str | None = None
    scenario_id: str | None = None
    agent: str | None = None
    agent_version: str | None = None


class TraceEvent(Stamps):
    """A stored event, as listed by GET /v1/traces, /v1/sandboxes/{id}/trace, /v1/agents/{name}/traces."""

    id: str = Field(description="evt_<seq>; seq orders events by arrival")
    trace_id: str
    span_id: str
    parent_span_id: str = Field(description="empty for a top-level span")
    root_span_id: str | None = Field(None, description="null while the root has not arrived yet")
    ts: str
    event_type: str
    tool: str | None = None
    phase: str
    duration_ms: int | None = None
    status: str | None = None
    error_type: str | None = None
    cost: Cost | None = None
    input: str | None = None
    output: str | None = None
    metadata: dict[str, Any] | None = None
    source: str = Field(description="api, sandbox or otlp")
    received_at: str


class Span(Stamps):
    """A span: its events merged. The `start` event gives started_at and input; the `end` event gives
    ended_at, duration_ms, status, error_type and output; cost and metadata merge (later wins)."""

    span_id: str
    trace_id: str
    parent_span_id: str
    root_span_id: str | None = None
    depth: int | None = Field(None, description="0 for a root (only in GET /v1/traces/{id})")
    event_type: str
    tool: str | None = None
    phases: list[str] = Field(description="phases seen, e.g. [start, end]")
    open: bool = Field(description="true when a start was seen but no end yet")
    status: str | None = None
    error_type: str | None = None
    started_at: str
    ended_at: str | None = None
    duration_ms: int | None = None
    cost: Cost | None = None
    input: str | None = None
    output: str | None = None
    metadata: dict[str, Any] | None = None
    source: str


class TraceDetail(Response):
    """GET /v1/traces/{id}: every span of the trace in tree order (depth-first: a parent before its
    children, siblings by start time). A span whose parent is not (yet) in the trace is listed as a
    root (depth 0)."""

    trace_id: str
    spans: list[Span]
    span_count: int
    event_count: int
    root_span_ids: list[str]
    started_at: str | None
    ended_at: str | None
    duration_ms: int | None
    total_cost_usd: float = Field(description="the sum of the priced calls' costs")
    unpriced_calls: int = Field(0, description="llm_call spans left out of total_cost_usd: their cost is unknown")
    input_tokens: int
    output_tokens: int
    errors: int = Field(description="spans with status error")
    sandbox_id: str | None = None
    run_id: str | None = None
    experiment_id: str | None = None
    agent: str | None = None


class ToolMetrics(Response):
    count: int
    mean_ms: float | None
    error_rate: float


class AgentMetrics(Response):
    spans: int = Field(description="closed llm_call and tool_call spans measured")
    llm_calls: int
    tool_calls: int
    tool_success_rate: float | None = Field(description="share of tool_call spans with status ok")
    latency_p50_ms: float | None = Field(description="over llm_call and tool_call span durations")
    latency_p95_ms: float | None
    total_cost_usd: float = Field(description="the sum of the priced calls' costs")
    unpriced_calls: int = Field(0, description="llm_call events left out of total_cost_usd: their cost is unknown")
    input_tokens: int
    output_tokens: int
    tools: dict[str, ToolMetrics]


class AgentTraces(Response):
    agent: str
    version: str | None
    items: list[TraceEvent]
    next_cursor: str | None
    count: int
    metrics: AgentMetrics


# -- list queries ------------------------------------------------------------------------------------

def _rfc3339(value: str | None) -> str | None:
    if value is not None:
        text = value.strip()
        if not text:
            raise ValueError("an RFC 3339 date-time is required (e.g. 2025-01-31T12:00:00Z)")
        text = text[:-1] + "+00:00" if text.endswith(("z", "Z")) else text
        datetime.fromisoformat(text)  # ValueError: 400 naming the parameter
    return value


DATE_TIME = {"format": "date-time"}


class _ListQuery(Query):
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="items per page")
    cursor: str | None = Field(default=None, pattern=CURSOR_PATTERN, description="next_cursor of the previous page")
    order: Literal["asc", "desc"] = Field(default="desc", description="desc (default): newest first")
    format: Literal["json", "ndjson"] | None = Field(
        default=None, description="json (default) | ndjson: stream every match, one event per line (also Accept: application/x-ndjson)")
    since: str | None = Field(default=None, description="RFC 3339: events at or after", json_schema_extra=DATE_TIME)
    until: str | None = Field(default=None, description="RFC 3339: events before", json_schema_extra=DATE_TIME)
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    root_span_id: str | None = None
    tool: str | None = Field(default=None, description="tool name")
    event_type: EventType | None = None
    experiment_id: str | None = None
    run_id: str | None = None
    scenario_id: str | None = None
    agent: str | None = Field(default=None, description="agent name")

    _dates = field_validator("since", "until")(classmethod(lambda cls, v: _rfc3339(v)))


class SandboxEventListQuery(_ListQuery):
    """GET /v1/sandboxes/{id}/trace."""
    agent_version: str | None = None
    status: Literal["ok", "error"] | None = None
    phase: Phase | None = None


class EventListQuery(SandboxEventListQuery):
    """GET /v1/traces."""
    sandbox_id: str | None = None


class SpanListQuery(_ListQuery):
    """GET /v1/spans."""
    sandbox_id: str | None = None
    root_span: str | None = Field(default=None, description="alias of root_span_id")


class AgentTracesQuery(Query):
    """GET /v1/agents/{name}/traces."""
    version: str | None = Field(default=None, description="agent version")
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="events per page")
    cursor: str | None = Field(default=None, pattern=CURSOR_PATTERN, description="next page")
