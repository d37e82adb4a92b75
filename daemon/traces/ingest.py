"""Turning posted events into rows: per-event validation, truncation, secret scrubbing, pricing.

`prepare_events` validates every event on its own and returns the good ones (as `Prepared` dicts
the writer stores) and an error per bad one, with its index. Trace ids, root spans and the `head`
flag are resolved later by the writer, which sees every event in arrival order.
"""
from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from daemon.traces import pricing
from daemon.traces.models import MAX_EVENTS_PER_REQUEST, TEXT_LIMIT_BYTES, TraceEventIn

METADATA_LIMIT_BYTES = 16 * 1024
REDACTED = "[redacted]"

# Values that look like credentials, wherever they appear in input, output or metadata strings.
_SECRET_VALUE = re.compile(
    r"(?i)(?P<bearer>\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=\-]{8,}"
    r"|\bsvc_(?:live|sb)_[A-Za-z0-9_\-]{8,}"
    r"|\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"
)
# Metadata keys whose values are never stored.
_SECRET_KEY = re.compile(
    r"(?i)(?:^|[._\-\s])(?:authorization|proxy-authorization|cookie|set-cookie|token|access[_\-]?token|"
    r"refresh[_\-]?token|secret|client[_\-]?secret|password|passwd|api[_\-]?key|apikey|x-api-key|credentials?)$"
)


def new_trace_id() -> str:
    return "trace-" + secrets.token_hex(16)


def new_span_id() -> str:
    return "span_" + secrets.token_hex(8)


def format_ts(dt: datetime) -> str:
    """Fixed-width UTC timestamps sort as text: 2025-01-02T03:04:05.123456Z."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    else:
        dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_ts() -> str:
    return format_ts(datetime.now(timezone.utc))


def parse_rfc3339(value: str) -> str:
    """A query's `since`: RFC 3339 (or a date) in the stored fixed-width format; ValueError if not."""
    text = value.strip()
    if not text:
        raise ValueError("empty")
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    return format_ts(datetime.fromisoformat(text))


def truncate(text: str, limit: int = TEXT_LIMIT_BYTES, total_bytes: int | None = None) -> str:
    """At most `limit` UTF-8 bytes, cut on a character boundary, ending `…[truncated N bytes]`.
    `total_bytes`: the size of the original when `text` is only its head."""
    if total_bytes is None and len(text) * 4 <= limit:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    total = max(total_bytes or 0, len(raw))
    if total <= limit:
        return text
    marker_len = len(f"…[truncated {total} bytes]".encode())
    kept = raw[: max(0, limit - marker_len)].decode("utf-8", "ignore")
    kept_bytes = len(kept.encode("utf-8", "surrogatepass"))
    return f"{kept}…[truncated {total - kept_bytes} bytes]"


def _may_hold_secret(t: str) -> bool:
    """Cheap substring checks; the regex runs only on text containing one of these."""
    return ("earer" in t or "EARER" in t or "asic " in t or "ASIC " in t or "svc_" in t or "sk-" in t or "AKIA" in t
            or "ghp_" in t or "gho_" in t or "ghu_" in t or "ghs_" in t or "ghr_" in t or "xox" in t)


def scrub_text(text: str) -> str:
    if not _may_hold_secret(text) or not _SECRET_VALUE.search(text):
        return text
    return _SECRET_VALUE.sub(lambda m: (m.group("bearer") or "") + REDACTED, text)


@lru_cache(maxsize=8192)
def secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


def scrub(value: Any, depth: int = 0) -> Any:
    """Metadata with credential-looking keys and values replaced by [redacted]."""
    if depth > 20:
        return "[too deep]"
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = str(key)
            out[key] = REDACTED if secret_key(key) and item not in (None, "") else scrub(item, depth + 1)
        return out
    if isinstance(value, list):
        return [scrub(item, depth + 1) for item in value]
    if isinstance(value, str):
        return scrub_text(value)
    return value


def text_field(value: Any) -> str | None:
    """input/output: strings as they are, any other JSON value serialised; scrubbed and truncated."""
    if value is None:
        return None
    if not isinstance(value, str):
        try:
            value = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            value = str(value)
    if len(value) > 2 * TEXT_LIMIT_BYTES:  # scrub only the part that is kept
        return truncate(scrub_text(value[: 2 * TEXT_LIMIT_BYTES]), total_bytes=len(value.encode("utf-8", "surrogatepass")))
    return truncate(scrub_text(value))


def metadata_json(value: dict[str, Any] | None, scrubbed: bool = False) -> str | None:
    """Metadata as stored: scrubbed (unless `scrubbed` says it already is) and at most 16 KiB."""
    if not value:
        return None
    clean = value if scrubbed else scrub(value)
    text = json.dumps(clean, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text) <= METADATA_LIMIT_BYTES // 4 or len(text.encode()) <= METADATA_LIMIT_BYTES:
        return text
    shortened = {k: (truncate(v, 512) if isinstance(v, str) else v) for k, v in clean.items()}
    text = json.dumps(shortened, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text.encode()) <= METADATA_LIMIT_BYTES:
        return text
    return json.dumps({"_truncated": f"metadata exceeded {METADATA_LIMIT_BYTES} bytes", "keys": list(clean)[:100]})


def cost_fields(cost: dict[str, Any] | None) -> tuple[str | None, int | None, int | None, int | None, float | None, str | None]:
    """(model, input, output, cached, usd, cost JSON) with the daemon's own price. A call it cannot
    price (no token counts, or a model not in the table) has usd None: unknown, not free."""
    if not cost:
        return None, None, None, None, None, None
    model = cost.get("model")
    inp, out, cached = cost.get("input_tokens"), cost.get("output_tokens"), cost.get("cached_tokens")
    usd, priced = pricing.estimate(model, inp, out, cached)
    body: dict[str, Any] = {"model": model, "input_tokens": inp, "output_tokens": out}
    if cached is not None:
        body["cached_tokens"] = cached
    if cost.get("reasoning_tokens") is not None:
        body["reasoning_tokens"] = cost["reasoning_tokens"]
    body["estimated_usd"] = usd
    if priced:
        body["priced_as"] = pricing.lookup(model)[0]  # type: ignore[index]
    else:
        body["unpriced"] = True
        body["unpriced_reason"] = (
            "no token counts" if inp is None and out is None
            else "no model" if not model else "model not in the pricing table")
    return model, inp, out, cached, usd, json.dumps(body, separators=(",", ":"))


def prepare(event: TraceEventIn, received_at: str, source: str, sandbox_id: str | None) -> dict[str, Any]:
    """A validated event as a row dict (without tenant, seq, head; trace/root maybe unresolved)."""
    phase = event.phase
    status = event.status
    if status is None and phase in ("end", "complete"):
        status = "ok"
    model, inp, out, cached, usd, cost_text = cost_fields(event.cost.model_dump(exclude_none=True) if event.cost else None)
    return {
        "trace_id": event.trace_id,
        "span_id": event.span_id or new_span_id(),
        "parent_span_id": event.parent_span_id or None,
        "root_span_id": event.root_span_id,
        "ts": format_ts(event.ts) if event.ts is not None else received_at,
        "event_type": event.event_type,
        "phase": phase,
        "tool": event.tool,
        "status": status,
        "error_type": event.error_type,
        "duration_ms": None if event.duration_ms is None else int(round(event.duration_ms)),
        "model": model,
        "input_tokens": inp,
        "output_tokens": out,
        "cached_tokens": cached,
        "cost_usd": usd,
        "cost": cost_text,
        "input": text_field(event.input),
        "output": text_field(event.output),
        "metadata": metadata_json(event.metadata),
        "sandbox_id": sandbox_id,
        "run_id": event.run_id,
        "experiment_id": event.experiment_id,
        "scenario_id": event.scenario_id,
        "agent": event.agent,
        "agent_version": _version(event.agent_version),
        "source": source,
        "received_at": received_at,
    }


def _version(value: str | int | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)


class BodyError(ValueError):
    """The body is not `{events: [...]}` (400 for the whole request)."""

    def __init__(self, message: str, loc: str = "events"):
        super().__init__(message)
        self.loc = loc


def prepare_events(
    body: Any, source: str, sandbox_id: str | None = None
) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """([(index, row)], [errors]) for a posted `{events: [...]}` body."""
    if not isinstance(body, dict):
        raise BodyError("request body must be a JSON object {events: [...]}", "body")
    extra = sorted(set(body) - {"events"})
    if extra:
        raise BodyError(f"unknown top-level field '{extra[0]}'; the body is {{events: [...]}}", extra[0])
    events = body.get("events")
    if not isinstance(events, list):
        raise BodyError("'events' must be an array of trace events")
    if len(events) > MAX_EVENTS_PER_REQUEST:
        raise BodyError(f"too many events in one request: {len(events)} (at most {MAX_EVENTS_PER_REQUEST}); split the batch")
    received_at = now_ts()
    good: list[tuple[int, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    for index, raw in enumerate(events):
        if not isinstance(raw, dict):
            errors.append({"index": index, "loc": f"events.{index}", "msg": "an event must be a JSON object"})
            continue
        try:
            event = TraceEventIn.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors(include_url=False, include_input=False)[:5]:
                loc = ".".join(str(part) for part in err["loc"])
                errors.append({"index": index, "loc": f"events.{index}" + (f".{loc}" if loc else ""), "msg": err["msg"]})
            continue
        if event.phase == "end" and not event.span_id:
            errors.append({"index": index, "loc": f"events.{index}.span_id", "msg": "an end event needs the span_id of its start event"})
            continue
        good.append((index, prepare(event, received_at, source, sandbox_id)))
    return good, errors
