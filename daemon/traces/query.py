"""Reading traces: event lists, span lists (events merged per span), a trace as a tree, metrics.

Every query filters by tenant. Lists are newest first by `seq` (arrival order) unless `order=asc`;
the cursor is the last row's seq, so paging while ingest continues returns every event that existed
when paging began exactly once.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, AsyncIterator, Iterable

from daemon.errors import InvalidRequest
from daemon.store import traces as trace_store
from daemon.store.pagination import encode_cursor
from daemon.store.traces import EVENT_COLUMNS, SELECTIVE, tenant_clause  # noqa: F401 (re-exported)
from daemon.traces.ingest import parse_rfc3339
from daemon.traces.models import EVENT_TYPES, PHASES

# query parameter -> column, for equality filters
EVENT_FILTERS = {
    "experiment_id": "experiment_id", "sandbox_id": "sandbox_id", "agent": "agent", "agent_version": "agent_version",
    "event_type": "event_type", "tool": "tool", "run_id": "run_id", "scenario_id": "scenario_id",
    "trace_id": "trace_id", "span_id": "span_id", "parent_span_id": "parent_span_id", "root_span_id": "root_span_id",
    "status": "status", "phase": "phase",
}
SPAN_FILTERS = {
    "trace_id": "trace_id", "span_id": "span_id", "parent_span_id": "parent_span_id", "root_span_id": "root_span_id",
    "root_span": "root_span_id", "tool": "tool", "event_type": "event_type", "experiment_id": "experiment_id",
    "sandbox_id": "sandbox_id", "run_id": "run_id", "scenario_id": "scenario_id", "agent": "agent",
}
COMMON_PARAMS = {"limit", "cursor", "format", "order", "since", "until"}


def _bad(loc: str, msg: str) -> InvalidRequest:
    return InvalidRequest(f"{loc}: {msg}", [{"loc": loc, "msg": msg}])


def build_filters(query: Any, allowed: dict[str, str], fixed: dict[str, Any] | None = None) -> tuple[str, list[Any]]:
    """(" AND col = ? ...", params) from the request's query string; 400 on an unknown parameter or a
    bad value, naming it (`query.since`)."""
    unknown = sorted(set(query) - set(allowed) - COMMON_PARAMS - {"version"})
    if unknown:
        known = ", ".join(sorted(set(allowed) | {"since", "until", "limit", "cursor", "order", "format"}))
        raise _bad(f"query.{unknown[0]}", f"unknown filter; known: {known}")
    sql, params = "", []
    for name, column in allowed.items():
        value = query.get(name)
        if value is None or value == "":
            continue
        if name == "event_type" and value not in EVENT_TYPES:
            raise _bad("query.event_type", f"must be one of {', '.join(EVENT_TYPES)}")
        if name == "phase" and value not in PHASES:
            raise _bad("query.phase", f"must be one of {', '.join(PHASES)}")
        sql += f" AND {column} = ?"
        params.append(value)
    for name, op in (("since", ">="), ("until", "<")):
        value = query.get(name)
        if value:
            try:
                sql += f" AND ts {op} ?"
                params.append(parse_rfc3339(value))
            except ValueError:
                raise _bad(f"query.{name}", f"not an RFC 3339 date-time: {value!r} (e.g. 2025-01-31T12:00:00Z)")
    for column, value in (fixed or {}).items():
        sql += f" AND {column} = ?"
        params.append(value)
    return sql, params


def order_param(query: Any) -> str:
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise _bad("query.order", "must be asc or desc")
    return order


def wants_ndjson(request: Any) -> bool:
    fmt = request.query.get("format")
    if fmt not in (None, "", "json", "ndjson"):
        raise _bad("query.format", "must be json or ndjson")
    return fmt == "ndjson" or (fmt is None and "application/x-ndjson" in request.headers.get("Accept", ""))


# -- shaping rows ----------------------------------------------------------------------------------

def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def event_out(row: Any) -> dict[str, Any]:
    return {
        "id": f"evt_{row['seq']}",
        "trace_id": row["trace_id"],
        "span_id": row["span_id"],
        "parent_span_id": row["parent_span_id"] or "",
        "root_span_id": row["root_span_id"],
        "ts": row["ts"],
        "event_type": row["event_type"],
        "tool": row["tool"],
        "phase": row["phase"],
        "duration_ms": row["duration_ms"],
        "status": row["status"],
        "error_type": row["error_type"],
        "cost": _loads(row["cost"]),
        "input": row["input"],
        "output": row["output"],
        "metadata": _loads(row["metadata"]),
        "sandbox_id": row["sandbox_id"],
        "run_id": row["run_id"],
        "experiment_id": row["experiment_id"],
        "scenario_id": row["scenario_id"],
        "agent": row["agent"],
        "agent_version": row["agent_version"],
        "source": row["source"],
        "received_at": row["received_at"],
    }


def _parse_ts(ts: str) -> datetime:
    return datetime.fromisoformat(ts[:-1] + "+00:00" if ts.endswith("Z") else ts)


def _plus_ms(ts: str, ms: int) -> str:
    from datetime import timedelta

    from daemon.traces.ingest import format_ts

    return format_ts(_parse_ts(ts) + timedelta(milliseconds=ms))


STAMPS = ("sandbox_id", "run_id", "experiment_id", "scenario_id", "agent", "agent_version")
# Positions in EVENT_COLUMNS (rows are read by index: much faster than by name for big traces).
(_SEQ, _TRACE, _SPAN, _PARENT, _ROOT, _HEAD, _TS, _TYPE, _PHASE, _TOOL, _STATUS, _ERRTYPE, _DURATION, _USD, _COST,
 _INPUT, _OUTPUT, _META, _SANDBOX, _RUN, _EXPERIMENT, _SCENARIO, _AGENT, _AGENT_VERSION, _SOURCE, _RECEIVED) = range(26)
_STAMP_POS = tuple(zip(STAMPS, (_SANDBOX, _RUN, _EXPERIMENT, _SCENARIO, _AGENT, _AGENT_VERSION)))


def merge_span(rows: Iterable[Any]) -> dict[str, Any]:
    """One span from its events in arrival order (see models.Span)."""
    span: dict[str, Any] | None = None
    started_from_start = False
    phases: list[str] = []
    for row in rows:
        phase = row[_PHASE]
        if span is None:
            span = {
                "span_id": row[_SPAN], "trace_id": row[_TRACE], "parent_span_id": row[_PARENT] or "",
                "root_span_id": row[_ROOT], "depth": None, "event_type": row[_TYPE], "tool": row[_TOOL],
                "phases": phases, "open": False, "status": None, "error_type": None, "started_at": row[_TS],
                "ended_at": None, "duration_ms": None, "cost": None, "input": None, "output": None, "metadata": None,
                "sandbox_id": row[_SANDBOX], "run_id": row[_RUN], "experiment_id": row[_EXPERIMENT],
                "scenario_id": row[_SCENARIO], "agent": row[_AGENT], "agent_version": row[_AGENT_VERSION],
                "source": row[_SOURCE], "_seq": row[_SEQ],
            }
        else:
            if row[_ROOT]:
                span["root_span_id"] = row[_ROOT]
            if not span["parent_span_id"] and row[_PARENT]:
                span["parent_span_id"] = row[_PARENT]
            if not span["tool"] and row[_TOOL]:
                span["tool"] = row[_TOOL]
            for key, pos in _STAMP_POS:
                if span[key] is None and row[pos] is not None:
                    span[key] = row[pos]
        phases.append(phase)
        if phase == "start" or phase == "complete" or phase == "invoked":
            if phase == "start" or not started_from_start:
                span["started_at"] = row[_TS]
                started_from_start = started_from_start or phase == "start"
            if span["input"] is None:
                span["input"] = row[_INPUT]
        if phase == "end" or phase == "complete":
            span["status"] = row[_STATUS] or span["status"]
            span["error_type"] = row[_ERRTYPE] or span["error_type"]
            if row[_OUTPUT] is not None:
                span["output"] = row[_OUTPUT]
            if row[_DURATION] is not None:
                span["duration_ms"] = row[_DURATION]
            span["ended_at"] = row[_TS] if phase == "end" else None
            if span["input"] is None:
                span["input"] = row[_INPUT]
        elif row[_STATUS] and span["status"] is None:
            span["status"] = row[_STATUS]
        if row[_COST]:
            cost = json.loads(row[_COST])
            span["cost"] = cost if span["cost"] is None else {**span["cost"], **{k: v for k, v in cost.items() if v is not None}}
        if row[_META]:
            meta = json.loads(row[_META])
            span["metadata"] = meta if span["metadata"] is None else {**span["metadata"], **meta}
    assert span is not None
    closed = "end" in phases or "complete" in phases
    span["open"] = not closed and "start" in phases
    if span["duration_ms"] is None and span["ended_at"] and started_from_start:
        span["duration_ms"] = max(0, round((_parse_ts(span["ended_at"]) - _parse_ts(span["started_at"])).total_seconds() * 1000))
    if span["ended_at"] is None and closed and span["duration_ms"] is not None:
        span["ended_at"] = _plus_ms(span["started_at"], span["duration_ms"])
    return span


def _public_span(span: dict[str, Any]) -> dict[str, Any]:
    span.pop("_seq", None)
    return span


# -- queries ---------------------------------------------------------------------------------------

async def page_events(db: Any, page: tuple[int, int | None], order: str, tenant_id: str, where: str,
                      params: list[Any]) -> dict[str, Any]:
    """One page of events matching `where` (starting ' AND ...'); `page` is (limit, after seq)."""
    return await _page(db, page, order, tenant_id, where, params, head_only=False)


async def page_spans(db: Any, page: tuple[int, int | None], order: str, tenant_id: str, where: str,
                     params: list[Any]) -> dict[str, Any]:
    """One page of spans (one item per span, its events merged) matching `where`."""
    return await _page(db, page, order, tenant_id, where, params, head_only=True)


async def _page(db: Any, page: tuple[int, int | None], order: str, tenant_id: str, where: str, params: list[Any],
                head_only: bool) -> dict[str, Any]:
    limit, after = page
    rows = await trace_store.event_rows(db, tenant_id, where, params, order=order, limit=limit + 1, after=after,
                                        head_only=head_only)
    kept = rows[:limit]
    items = await _spans_for_heads(db, tenant_id, kept) if head_only else [event_out(r) for r in kept]
    return {
        "items": items,
        "next_cursor": encode_cursor(kept[-1]["seq"]) if len(rows) > limit and kept else None,
        "count": len(kept),
    }


async def iter_events(db: Any, tenant_id: str, where: str, params: list[Any], order: str = "desc",
                      chunk: int = 1000, head_only: bool = False) -> AsyncIterator[dict[str, Any]]:
    """Every matching event (or span, with head_only), fetched `chunk` rows at a time."""
    after: int | None = None
    while True:
        rows = await trace_store.iter_rows(db, tenant_id, where, params, order=order, after=after, chunk=chunk,
                                           head_only=head_only)
        if not rows:
            return
        if head_only:
            for span in await _spans_for_heads(db, tenant_id, rows):
                yield span
        else:
            for row in rows:
                yield event_out(row)
        if len(rows) < chunk:
            return
        after = rows[-1]["seq"]


async def _spans_for_heads(db: Any, tenant_id: str, heads: list[Any]) -> list[dict[str, Any]]:
    """Spans for a page of head rows: their other events fetched in one query and merged."""
    ids = list(dict.fromkeys(r["span_id"] for r in heads))
    tails: dict[str, list[Any]] = {}
    for row in await trace_store.tail_rows(db, tenant_id, ids):
        tails.setdefault(row["span_id"], []).append(row)
    return [_public_span(merge_span([head, *tails.get(head["span_id"], [])])) for head in heads]




trace_owner = trace_store.trace_owner


def build_tree(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Depth-first order: a parent before its children, siblings (and roots) by start time then
    arrival. Spans whose parent is missing are roots; spans caught in a parent cycle come last."""
    by_id = {s["span_id"]: s for s in spans}
    children: dict[str, list[dict[str, Any]]] = {}
    roots = []
    for span in spans:
        parent = span["parent_span_id"]
        if parent and parent in by_id and parent != span["span_id"]:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)

    def key(s: dict[str, Any]) -> tuple[str, int]:
        return (s["started_at"], s["_seq"])

    ordered: list[dict[str, Any]] = []
    visited: set[str] = set()
    stack = [(s, 0) for s in sorted(roots, key=key, reverse=True)]
    while stack:
        span, depth = stack.pop()
        if span["span_id"] in visited:
            continue
        visited.add(span["span_id"])
        span["depth"] = depth
        ordered.append(span)
        for child in sorted(children.get(span["span_id"], ()), key=key, reverse=True):
            stack.append((child, depth + 1))
    if len(ordered) < len(spans):
        for span in sorted((s for s in spans if s["span_id"] not in visited), key=key):
            span["depth"] = 0
            ordered.append(span)
    return ordered


trace_rows = trace_store.trace_rows


async def trace_detail(db: Any, tenant_id: str, trace_id: str) -> dict[str, Any] | None:
    rows = await trace_rows(db, tenant_id, trace_id)
    return build_trace(trace_id, rows) if rows else None


def build_trace(trace_id: str, rows: list[Any]) -> dict[str, Any]:
    """models.TraceDetail from a trace's rows (in seq order). CPU-bound for big traces: the API runs
    it in a worker thread so the event loop keeps serving."""
    by_span: dict[str, list[Any]] = {}
    for row in rows:
        by_span.setdefault(row["span_id"], []).append(row)
    spans = [merge_span(group) for group in by_span.values()]
    ordered = build_tree(spans)
    starts = [s["started_at"] for s in spans]
    ends = [s["ended_at"] for s in spans if s["ended_at"]]
    started, ended = min(starts), (max(ends) if ends else None)
    total_cost = input_tokens = output_tokens = unpriced = 0
    for s in spans:
        cost = s["cost"] or {}
        total_cost += cost.get("estimated_usd") or 0
        unpriced += s["event_type"] == "llm_call" and not s["open"] and cost.get("estimated_usd") is None
        input_tokens += cost.get("input_tokens") or 0
        output_tokens += cost.get("output_tokens") or 0
    first = ordered[0]
    return {
        "trace_id": trace_id,
        "span_count": len(spans),
        "event_count": len(rows),
        "root_span_ids": [s["span_id"] for s in ordered if s["depth"] == 0],
        "started_at": started,
        "ended_at": ended,
        "duration_ms": max(0, round((_parse_ts(ended) - _parse_ts(started)).total_seconds() * 1000)) if ended else None,
        "total_cost_usd": round(total_cost, 10),
        "unpriced_calls": unpriced,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "errors": sum(1 for s in spans if s["status"] == "error"),
        "sandbox_id": first["sandbox_id"],
        "run_id": first["run_id"],
        "experiment_id": first["experiment_id"],
        "agent": first["agent"],
        "spans": [_public_span(s) for s in ordered],
    }


def _percentile(sorted_values: list[float], pct: float) -> float | None:
    if not sorted_values:
        return None
    rank = (len(sorted_values) - 1) * pct
    low = int(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return round(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low), 3)


async def metrics(db: Any, tenant_id: str, where: str, params: list[Any], sample: int = 100_000) -> dict[str, Any]:
    """Tool and latency metrics over the closed llm_call / tool_call spans matching `where`
    (the most recent `sample` of them), cost and tokens over every matching event. Reusable by
    experiment and run metrics: pass e.g. ' AND experiment_id = ?'."""
    rows = await trace_store.closed_call_rows(db, tenant_id, where, params, sample)
    totals = await trace_store.cost_totals(db, tenant_id, where, params)
    durations: list[float] = []
    tools: dict[str, dict[str, Any]] = {}
    llm_calls = tool_calls = tool_ok = 0
    for row in rows:
        if row["duration_ms"] is not None:
            durations.append(row["duration_ms"])
        if row["event_type"] == "llm_call":
            llm_calls += 1
            continue
        tool_calls += 1
        ok = row["status"] != "error"
        tool_ok += ok
        entry = tools.setdefault(row["tool"] or "(unnamed)", {"count": 0, "errors": 0, "ms": []})
        entry["count"] += 1
        entry["errors"] += not ok
        if row["duration_ms"] is not None:
            entry["ms"].append(row["duration_ms"])
    durations.sort()
    return {
        "spans": len(rows),
        "llm_calls": llm_calls,
        "tool_calls": tool_calls,
        "tool_success_rate": round(tool_ok / tool_calls, 6) if tool_calls else None,
        "latency_p50_ms": _percentile(durations, 0.50),
        "latency_p95_ms": _percentile(durations, 0.95),
        "total_cost_usd": round(totals["usd"], 10),
        "unpriced_calls": totals["unpriced"],
        "input_tokens": totals["inp"],
        "output_tokens": totals["outp"],
        "tools": {
            name: {
                "count": e["count"],
                "mean_ms": round(sum(e["ms"]) / len(e["ms"]), 3) if e["ms"] else None,
                "error_rate": round(e["errors"] / e["count"], 6),
            }
            for name, e in sorted(tools.items())
        },
    }
