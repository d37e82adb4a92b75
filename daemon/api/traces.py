"""Traces: ingest (JSON events, OTLP/HTTP) and reads (events, spans, a trace as a tree, a sandbox's
trace, an agent's traces with metrics). Shapes: daemon/traces/models.py; storage and resolution
rules: daemon/traces/writer.py."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from daemon.contract.agents import NAME_RE, NAME_SCHEMA
from daemon.errors import Forbidden, InvalidRequest, NotFound, UnsupportedMediaType
from daemon.appkeys import TRACE_DB, TRACE_WRITER
from daemon.contract import routes as R
from daemon.http import EVENTS, OFF_LOOP_BYTES, SETTINGS, STORE, Reply, Routes, decode_json, page_params, read_bytes
from daemon.sandbox.redact import Redactor
from daemon.sse import ndjson_response
from daemon.store import experiments as experiment_store
from daemon.store import sandboxes as sandbox_store
from daemon.store import traces as trace_store
from daemon.store.db import Store
from daemon.traces import gateway, otlp, pricing, query, sandbox_ext
from daemon.traces.ingest import BodyError, prepare_events
from daemon.traces.sandbox_events import redact_rows, sandbox_redactor, stamp_sandbox_rows
from daemon.traces.writer import TraceWriter

routes = Routes("traces")
log = logging.getLogger("svcd.traces")
MAX_LISTED_ERRORS = 1000
BIG_TRACE_ROWS = 2000


def setup(app: web.Application) -> None:
    app.cleanup_ctx.append(_traces_ctx)
    # after every cleanup context (the sandbox manager's too) has started
    app.on_startup.append(sandbox_ext.register)
    app.on_startup.append(gateway.register)


async def _traces_ctx(app: web.Application):
    settings = app[SETTINGS]
    bus = app[EVENTS]
    pricing_file = os.environ.get("SERVICE_PRICING_FILE")
    if pricing_file:
        count = pricing.load_overrides(pricing_file)
        log.info("loaded %d model prices from %s", count, pricing_file)

    def publish(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row["sandbox_id"]:
                bus.publish(f"sandbox:{row['sandbox_id']}", {"event_type": "trace", "data": query.event_out(row)})

    writer = TraceWriter(settings.db_path, on_commit=publish)
    await writer.start()
    reader = await trace_store.open_reader(settings.db_path)
    app[TRACE_WRITER] = writer
    app[TRACE_DB] = reader
    yield
    await writer.close()
    await reader.close()


# -- helpers -----------------------------------------------------------------------------------------

async def sandbox_owner(store: Store, sandbox_id: str) -> str | None:
    """The tenant owning a sandbox, or None when unknown (or the sandboxes table does not exist yet)."""
    try:
        return await sandbox_store.owner(store, sandbox_id)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise


async def _stamp_sandbox_rows(request: web.Request, rows: list[tuple[int, dict[str, Any]]]) -> None:
    """With a sandbox token, every event carries its sandbox's own ids, whatever the body says (an
    agent cannot file events under another run, experiment or scenario)."""
    principal = request["principal"]
    if principal.kind != "sandbox" or not rows:
        return
    await stamp_sandbox_rows(request.app, principal.tenant_id, principal.sandbox_id, rows)


async def check_sandbox(request: web.Request, sandbox_id: str, reading: bool = False) -> None:
    """A sandbox token may use its own sandbox (the auth middleware checked the id); a key must own
    the sandbox: 404 unknown, 403 another tenant's. For reads, a sandbox that has trace events of
    the caller's tenant also counts (its row may be gone)."""
    principal = request["principal"]
    if principal.kind == "sandbox" and principal.sandbox_id == sandbox_id:
        return
    owner = await sandbox_owner(request.app[STORE], sandbox_id)
    if owner is None and reading:
        owner = await trace_store.sandbox_owner(request.app[TRACE_DB], sandbox_id, request["tenant_id"])
    if owner is None:
        raise NotFound("sandbox", sandbox_id)
    if owner != request["tenant_id"]:
        raise Forbidden(f"sandbox '{sandbox_id}' belongs to another tenant")


async def _unknown_experiments(request: web.Request, rows: list[tuple[int, dict[str, Any]]]) -> dict[str, list[int]]:
    """Experiment ids the rows name that are not the tenant's experiments (nor replica suites), each
    with the indexes naming it. A sandbox token's rows carry the daemon's own stamps: not checked."""
    if request["principal"].kind == "sandbox":
        return {}
    named: dict[str, list[int]] = {}
    for index, row in rows:
        if row.get("experiment_id"):
            named.setdefault(row["experiment_id"], []).append(index)
    if not named:
        return {}
    known = await experiment_store.known_ids(request.app[STORE], request["tenant_id"], list(named))
    return {experiment_id: indexes for experiment_id, indexes in named.items() if experiment_id not in known}


def _ingest_result(stored: list[dict[str, Any]], errors: list[dict[str, Any]]) -> dict[str, Any]:
    errors.sort(key=lambda e: e["index"])
    return {
        "accepted": len(stored),
        "rejected": len({e["index"] for e in errors}),
        "errors": errors[:MAX_LISTED_ERRORS],
        "trace_ids": list(dict.fromkeys(row["trace_id"] for row in stored)),
    }


def _sandbox_redactor(request: web.Request, sandbox_id: str | None) -> Redactor | None:
    """The live sandbox's secret values (resolved and sent with the request), or None."""
    if sandbox_id is None:
        return None
    return sandbox_redactor(request.app, sandbox_id)


def _redact_otlp(message: Any, redactor: Redactor | None) -> Any:
    if redactor is None:
        return message
    from google.protobuf import json_format

    data = redactor.value(json_format.MessageToDict(message, preserving_proto_field_name=True))
    redacted = type(message)()
    try:
        json_format.ParseDict(data, redacted, ignore_unknown_fields=True)
    except json_format.ParseError:
        return message  # the row pass below still redacts every stored text
    return redacted


async def _ingest_events(request: web.Request, body: Any, source: str, sandbox_id: str | None) -> Reply:
    redactor = _sandbox_redactor(request, sandbox_id)

    def prepare(body: Any) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
        if redactor is not None:
            body = redactor.value(body)  # before truncation, so no secret is cut in half and kept
        rows, errors = prepare_events(body, source, sandbox_id)
        redact_rows(rows, redactor)
        return rows, errors

    try:  # a big batch takes a while to check and shape: off the event loop
        rows, errors = await asyncio.to_thread(prepare, body)
    except BodyError as exc:
        raise InvalidRequest(str(exc), [{"loc": exc.loc, "msg": str(exc)}])
    await _stamp_sandbox_rows(request, rows)
    unknown = await _unknown_experiments(request, rows)
    if unknown:  # filing events under an experiment that is not there is a mistake to fix, not to store
        problems = [{"loc": f"events.{index}.experiment_id", "msg": f"experiment '{experiment_id}' does not exist"}
                    for experiment_id, indexes in unknown.items() for index in indexes]
        first = problems[0]
        raise InvalidRequest(f"{first['loc']}: {first['msg']}; create the experiment first, or leave experiment_id out",
                             problems[:MAX_LISTED_ERRORS])
    stored, more = await request.app[TRACE_WRITER].write(request["tenant_id"], rows)
    return Reply(_ingest_result(stored, errors + more), status=202)


async def _ingest_otlp(request: web.Request, content_type: str, raw: bytes | None, data: Any, sandbox_id: str | None) -> web.Response:
    redactor = _sandbox_redactor(request, sandbox_id)

    def prepare() -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
        decoded = otlp.decode(raw, content_type) if raw is not None else otlp.decode_json(data)
        rows, errors = otlp.spans_to_rows(_redact_otlp(decoded, redactor), sandbox_id)
        redact_rows(rows, redactor)
        return rows, errors

    try:  # decoding a big export takes a while: off the event loop
        rows, errors = await asyncio.to_thread(prepare)
    except BodyError as exc:
        raise InvalidRequest(str(exc), [{"loc": exc.loc, "msg": str(exc)}])
    await _stamp_sandbox_rows(request, rows)
    unknown = await _unknown_experiments(request, rows)
    if unknown:  # those spans are rejected, each reported in partial_success; the others are kept
        refused = {index: experiment_id for experiment_id, indexes in unknown.items() for index in indexes}
        rows = [(index, row) for index, row in rows if index not in refused]
        errors += [{"index": index, "loc": "svc.experiment_id", "msg": f"experiment '{experiment_id}' does not exist"}
                   for index, experiment_id in refused.items()]
    stored, more = await request.app[TRACE_WRITER].write(request["tenant_id"], rows)
    errors += more
    errors.sort(key=lambda e: e["index"])
    message = "; ".join(f"span {e['index']} ({e['loc']}): {e['msg']}" for e in errors[:5])
    if len(errors) > 5:
        message += f"; and {len(errors) - 5} more"
    body = otlp.encode_response(content_type, len({e["index"] for e in errors}), message)
    return web.Response(body=body, status=200, content_type=content_type)


async def _read(request: web.Request) -> bytes:
    """The (decompressed) body; a body that does not match its Content-Encoding is 400."""
    try:
        return await read_bytes(request)
    except RequestPayloadError as exc:
        encoding = request.headers.get("Content-Encoding", "none")
        error = InvalidRequest(f"cannot read the request body (Content-Encoding: {encoding}): {str(exc).strip()}",
                               [{"loc": "body", "msg": "undecodable body"}])
        error.headers = {"Connection": "close"}  # aiohttp drops the connection after a broken payload
        raise error


async def _read_json(request: web.Request) -> Any:
    raw = await _read(request)
    if not raw.strip():
        raise InvalidRequest("request body is empty; expected a JSON object", [{"loc": "body", "msg": "empty"}])
    if len(raw) > OFF_LOOP_BYTES:  # a big body takes a while to decode: off the event loop
        return await asyncio.to_thread(decode_json, raw)
    return decode_json(raw)


def _content_type(request: web.Request, allowed: tuple[str, ...]) -> str:
    ct = request.content_type
    if ct not in allowed:
        raise UnsupportedMediaType(f"expected content type {' or '.join(allowed)}, got {ct or 'none'}")
    return ct


# -- ingest ------------------------------------------------------------------------------------------

@routes.post(
    R.INGEST_TRACES,
    "Ingest trace events without a sandbox: {events: [...]}; each bad event is reported with its index, the others kept",
    typed=True, raw_body=True,
)
async def ingest_traces(request: web.Request) -> Reply:
    _content_type(request, ("application/json",))
    return await _ingest_events(request, await _read_json(request), "api", None)


@routes.post(
    R.INGEST_SANDBOX_TRACE,
    "Ingest a sandbox's trace events ({events: [...]}, or an OTLP protobuf / OTLP-JSON export, answered in kind); stamped with the sandbox id (with the sandbox's token, also with its run, experiment and scenario ids, whatever the events say)",
    typed=True,
    responses={"200": {"description": "an OTLP export, answered in kind (ExportTraceServiceResponse)", "content": {
        otlp.PROTOBUF: {"schema": {"type": "string", "format": "binary"}}, "application/json": {"schema": {"type": "object"}}}}},
)
async def ingest_sandbox_trace(request: web.Request) -> web.StreamResponse | Reply:
    sandbox_id = request.match_info["sandbox_id"]
    ct = _content_type(request, ("application/json", otlp.PROTOBUF))
    await check_sandbox(request, sandbox_id)
    if ct == otlp.PROTOBUF:
        return await _ingest_otlp(request, ct, await _read(request), None, sandbox_id)
    body = await _read_json(request)
    if isinstance(body, dict) and ("resourceSpans" in body or "resource_spans" in body):
        return await _ingest_otlp(request, ct, None, body, sandbox_id)
    return await _ingest_events(request, body, "sandbox", sandbox_id)


@routes.post(
    R.INGEST_OTLP,
    "OTLP/HTTP trace export (application/x-protobuf or OTLP/JSON; gzip/deflate); answers ExportTraceServiceResponse in the request's content type, with partial_success when spans were rejected",
)
async def ingest_otlp(request: web.Request) -> web.Response:
    ct = _content_type(request, (otlp.PROTOBUF, otlp.JSON))
    raw = await _read(request)
    if not raw:
        raise InvalidRequest("empty OTLP body", [{"loc": "body", "msg": "empty"}])
    return await _ingest_otlp(request, ct, raw, None, None)


# -- reads -------------------------------------------------------------------------------------------

LIST_QUERY = {  # the event filters, each with what it matches
    "experiment_id": "exact", "sandbox_id": "exact", "agent": "agent name", "event_type": "llm_call | tool_use | tool_call | span",
    "tool": "tool name", "since": "RFC 3339: events at or after", "until": "RFC 3339: events before", "run_id": "exact",
    "scenario_id": "exact", "trace_id": "exact", "status": "ok | error", "order": "desc (default) | asc",
    "format": "json (default) | ndjson: stream every match, one event per line (also Accept: application/x-ndjson)",
}


async def _events_response(request: web.Request, fixed: dict[str, Any] | None = None,
                          allowed: dict[str, str] | None = None) -> web.StreamResponse | dict[str, Any]:
    where, params = query.build_filters(request.query, allowed or query.EVENT_FILTERS, fixed)
    db = request.app[TRACE_DB]
    if query.wants_ndjson(request):
        order = query.order_param(request.query)
        return await ndjson_response(request, query.iter_events(db, request["tenant_id"], where, params, order))
    page = page_params(request)
    return await query.page_events(db, page, query.order_param(request.query), request["tenant_id"], where, params)


@routes.get(R.LIST_TRACES, "List trace events, newest first (filters; NDJSON with format=ndjson)")
async def list_traces(request: web.Request) -> web.StreamResponse | dict[str, Any]:
    return await _events_response(request)


@routes.get(R.GET_TRACE, "One trace: every span, ordered as a tree (parent before children, siblings by start)", typed=True)
async def get_trace(request: web.Request) -> web.Response | dict[str, Any]:
    trace_id = request.match_info["trace_id"]
    rows = await query.trace_rows(request.app[TRACE_DB], request["tenant_id"], trace_id)
    if not rows:  # another tenant's trace is as unknown as one that does not exist: no 403 to probe ids with
        raise NotFound("trace", trace_id)
    if len(rows) < BIG_TRACE_ROWS:
        return query.build_trace(trace_id, rows)
    # A big trace takes a while to merge and serialise: off the event loop.
    body = await asyncio.to_thread(lambda: json.dumps(query.build_trace(trace_id, rows), separators=(",", ":")).encode())
    return web.Response(body=body, content_type="application/json")


@routes.get(
    R.LIST_SPANS,
    "List spans (each span's events merged), newest first",
)
async def list_spans(request: web.Request) -> web.StreamResponse | dict[str, Any]:
    where, params = query.build_filters(request.query, query.SPAN_FILTERS)
    db = request.app[TRACE_DB]
    if query.wants_ndjson(request):
        order = query.order_param(request.query)
        return await ndjson_response(request, query.iter_events(db, request["tenant_id"], where, params, order, head_only=True))
    page = page_params(request)
    return await query.page_spans(db, page, query.order_param(request.query), request["tenant_id"], where, params)


@routes.get(R.SANDBOX_TRACE, "A sandbox's trace events, newest first (same filters as GET /v1/traces)")
async def sandbox_trace(request: web.Request) -> web.StreamResponse | dict[str, Any]:
    sandbox_id = request.match_info["sandbox_id"]
    await check_sandbox(request, sandbox_id, reading=True)
    allowed = {k: v for k, v in query.EVENT_FILTERS.items() if k != "sandbox_id"}
    return await _events_response(request, {"sandbox_id": sandbox_id}, allowed)


@routes.get(
    R.AGENT_TRACES,
    "An agent's trace events (newest first) and metrics: tool success rate, latency p50/p95, cost, per-tool breakdown",
    path_params={"name": NAME_SCHEMA},
)
async def agent_traces(request: web.Request) -> dict[str, Any]:
    name = request.match_info["name"]
    if not NAME_RE.fullmatch(name) or ".." in name:
        raise InvalidRequest(f"'{name[:200]}' is not a valid agent name", [{"loc": "path.name", "msg": "invalid name"}])
    version = request.query.get("version") or None
    where, params = " AND agent = ?", [name]
    if version is not None:
        where += " AND agent_version = ?"
        params.append(version)
    extra = {k: v for k, v in query.EVENT_FILTERS.items() if k not in ("agent", "agent_version")}
    more, more_params = query.build_filters(request.query, extra)
    db = request.app[TRACE_DB]
    window = page_params(request)
    page = await query.page_events(db, window, query.order_param(request.query), request["tenant_id"], where + more,
                                   params + more_params)
    metrics = await query.metrics(db, request["tenant_id"], where, params)
    return {"agent": name, "version": version, **page, "metrics": metrics}
