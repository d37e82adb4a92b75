"""OTLP/HTTP trace ingest: `ExportTraceServiceRequest` (protobuf, or OTLP/JSON whose ids are hex)
decoded with `opentelemetry-proto`, each span turned into one `complete` trace event.

Mapping (every span attribute is also kept in the event's metadata, under its own key):
- ids: `trace-<32 hex>`, `span_<16 hex>`; the parent link is kept.
- event type, tool name, model, tokens, agent name, input and output: `daemon/traces/conventions.py`,
  one mapping for the OpenTelemetry GenAI, OpenLLMetry and OpenInference conventions (the table is
  docs/traces-conventions.md); priced by the daemon. A span without an agent name of its own takes
  the nearest ancestor's from the same export (an agent span's model and tool calls are its agent's).
- status code ERROR -> status `error`, error_type from `error.type` / the exception event, output the
  status message; otherwise `ok`. Duration from the start and end times.
- `svc.agent`, `svc.run_id`, `svc.experiment_id`, `svc.scenario_id`, `svc.agent_version` (span or
  resource attributes) stamp the event.
"""
from __future__ import annotations

import base64
import re
from datetime import datetime, timezone
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from daemon.errors import InvalidRequest
from daemon.http import decode_json as decode_json_bytes
from daemon.traces import conventions
from daemon.traces.ingest import BodyError, cost_fields, format_ts, metadata_json, now_ts, scrub, text_field

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
STATUS_ERROR = 2
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def decode(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise BodyError(f"malformed OTLP protobuf body: {exc or 'cannot decode ExportTraceServiceRequest'}", "body")
        return request
    try:
        data = decode_json_bytes(body, "OTLP/JSON body")
    except InvalidRequest as exc:
        raise BodyError(exc.message, "body")
    return decode_json(data)


def decode_json(data: Any) -> ExportTraceServiceRequest:
    if not isinstance(data, dict):
        raise BodyError("an OTLP/JSON body is an object {resourceSpans: [...]}", "body")
    _hex_ids_to_base64(data)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise BodyError(f"malformed OTLP/JSON body: {exc}", "body")
    return request


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP/JSON carries trace and span ids as hex; protobuf's JSON mapping expects base64."""
    for r, resource_spans in enumerate(_list(data, "resourceSpans", "resource_spans")):
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans")):
            for i, span in enumerate(_list(scope_spans, "spans")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                if not isinstance(span, dict):
                    raise BodyError(f"{where}: a span must be an object", where)
                _convert(span, ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"), where)
                for link in span.get("links") or []:
                    if isinstance(link, dict):
                        _convert(link, ("traceId", "trace_id", "spanId", "span_id"), where + ".links")


def _list(container: Any, *keys: str) -> list[Any]:
    if not isinstance(container, dict):
        return []
    for key in keys:
        value = container.get(key)
        if isinstance(value, list):
            return value
    return []


def _convert(obj: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        value = obj.get(key)
        if not isinstance(value, str) or value == "":
            continue
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise BodyError(f"{where}.{key}: {value!r} is not a hex id (OTLP/JSON ids are hex strings)", f"{where}.{key}")
        obj[key] = base64.b64encode(raw).decode()


def any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes(items: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in items}


def _nanos_to_ts(nanos: int) -> str:
    return format_ts(datetime.fromtimestamp(nanos / 1e9, tz=timezone.utc))


STAMP_KEYS = (("run_id", "svc.run_id"), ("experiment_id", "svc.experiment_id"), ("scenario_id", "svc.scenario_id"),
              ("agent", "svc.agent"), ("agent_version", "svc.agent_version"))
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


def _stamps(attrs: dict[str, Any]) -> dict[str, str]:
    out = {}
    for field, key in STAMP_KEYS:
        value = attrs.get(key)
        if value not in (None, ""):
            out[field] = str(value)[:200]
    return out


def spans_to_rows(
    request: ExportTraceServiceRequest, sandbox_id: str | None = None
) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """([(index, row)], [errors]) — index counts spans across the whole request."""
    received_at = now_ts()
    rows: list[tuple[int, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    index = -1
    for r, resource_spans in enumerate(request.resource_spans):
        resource = attributes(resource_spans.resource.attributes)
        context = {"resource": scrub(resource) if resource else None, "stamps": _stamps(resource),
                   "received_at": received_at, "sandbox_id": sandbox_id}
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            context["scope"] = (scope.name + (f"@{scope.version}" if scope.version else "")) if scope.name else None
            for i, span in enumerate(scope_spans.spans):
                index += 1
                try:
                    rows.append((index, span_to_row(span, context)))
                except ValueError as exc:
                    errors.append({"index": index, "loc": f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]", "msg": str(exc)})
    _inherit_agents([row for _, row in rows])
    return rows, errors


def _inherit_agents(rows: list[dict[str, Any]], max_depth: int = 64) -> None:
    """A span that names no agent takes its nearest ancestor's agent, when that ancestor is in the
    same export: OpenInference and the Agents SDK name the agent only on the agent's own span."""
    by_span = {row["span_id"]: row for row in rows}
    for row in rows:
        if row["agent"]:
            continue
        parent, depth = by_span.get(row["parent_span_id"]), 0
        while parent is not None and not parent["agent"] and depth < max_depth:
            parent, depth = by_span.get(parent["parent_span_id"]), depth + 1
        if parent is not None and parent["agent"]:
            row["agent"] = parent["agent"]


def span_to_row(span: Any, context: dict[str, Any]) -> dict[str, Any]:
    """One OTLP span as a trace-event row. `context`: resource (scrubbed), stamps, scope, received_at, sandbox_id."""
    trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE:
        raise ValueError("invalid trace_id: must be 16 bytes, not all zero")
    if len(span_id) != 8 or span_id == _ZERO_SPAN:
        raise ValueError("invalid span_id: must be 8 bytes, not all zero")
    if parent and len(parent) != 8:
        raise ValueError("invalid parent_span_id: must be 8 bytes or empty")
    name = span.name
    attrs = attributes(span.attributes)
    mapped = conventions.read(attrs, name)
    event_type, tool = mapped.event_type, mapped.tool
    model_name, inp, out, cached_tokens, usd, cost_text = cost_fields(mapped.cost)

    events = []
    exception = None
    if span.events:
        for ev in list(span.events)[:32]:
            ev_attrs = attributes(ev.attributes)
            events.append({"name": ev.name, "ts": _nanos_to_ts(ev.time_unix_nano) if ev.time_unix_nano else None, "attributes": ev_attrs})
            if ev.name == "exception" and exception is None:
                exception = ev_attrs
    status, error_type, output = "ok", None, mapped.output
    span_status = span.status
    status_message = span_status.message
    if span_status.code == STATUS_ERROR:
        status = "error"
        error_type = _error_name(str(mapped.error_type or (exception or {}).get("exception.type") or "error"))
        message = status_message or (exception or {}).get("exception.message")
        if message:
            output = f"{error_type}: {message}" if exception and not status_message else message

    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    duration = round((end - start) / 1e6) if start and end and end >= start else None
    metadata = scrub(attrs)
    metadata["otel.name"] = name
    metadata["otel.kind"] = KINDS.get(span.kind, str(span.kind))
    if context.get("scope"):
        metadata["otel.scope"] = context["scope"]
    if context.get("resource"):
        metadata["otel.resource"] = context["resource"]
    if events:
        metadata["otel.events"] = scrub(events)
    if span.links:
        metadata["otel.links"] = [{"trace_id": "trace-" + link.trace_id.hex(), "span_id": "span_" + link.span_id.hex()} for link in span.links][:32]
    if status_message:
        metadata["otel.status_message"] = scrub(status_message)
    if mapped.tool_calls:
        metadata["svc.tool_calls"] = scrub(mapped.tool_calls)

    stamps = context["stamps"]
    if any(key.startswith("svc.") for key in attrs):
        stamps = {**stamps, **_stamps(attrs)}
    agent = mapped.agent
    return {
        "trace_id": "trace-" + trace_id.hex(),
        "span_id": "span_" + span_id.hex(),
        "parent_span_id": ("span_" + parent.hex()) if parent and parent != _ZERO_SPAN else None,
        "root_span_id": None,
        "ts": _nanos_to_ts(start) if start else context["received_at"],
        "event_type": event_type,
        "phase": "complete",
        "tool": (tool or None) and str(tool)[:200],
        "status": status,
        "error_type": error_type,
        "duration_ms": duration,
        "model": model_name,
        "input_tokens": inp,
        "output_tokens": out,
        "cached_tokens": cached_tokens,
        "cost_usd": usd,
        "cost": cost_text,
        "input": text_field(mapped.input),
        "output": text_field(output),
        "metadata": metadata_json(metadata, scrubbed=True),
        "sandbox_id": context["sandbox_id"],
        "run_id": stamps.get("run_id"),
        "experiment_id": stamps.get("experiment_id"),
        "scenario_id": stamps.get("scenario_id"),
        "agent": str(agent)[:200] if agent else stamps.get("agent"),
        "agent_version": stamps.get("agent_version"),
        "source": "otlp",
        "received_at": context["received_at"],
    }


_QUALIFIED_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+")


def _error_name(value: str) -> str:
    """An exception's class name without its module (`openai.InternalServerError` is
    `InternalServerError`, as OpenLLMetry and svc's SDK write it); the full name stays in metadata."""
    return value.rsplit(".", 1)[-1] if _QUALIFIED_NAME.fullmatch(value) else value


def encode_response(content_type: str, rejected: int, message: str) -> bytes:
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    if content_type == PROTOBUF:
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode()
