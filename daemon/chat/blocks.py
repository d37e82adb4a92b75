"""Slack Block Kit messages the daemon posts (SPEC "Alert notifications": the chat message)."""
from __future__ import annotations

import json
from typing import Any

SECTION_CHARS = 2900  # Slack: a section's text is at most 3000 characters
BUTTON_VALUE_CHARS = 2000  # Slack: a button's value is at most 2000 characters
DEBUG_ACTION = "svc_debug_context"  # the button answered by POST /v1/chat/interactions
FIELD_CHARS = 2000  # Slack: each text of a section's fields is at most 2000 characters


def escape(text: Any) -> str:
    """Tenant-supplied text as literal mrkdwn: no <!channel>, <@user> or <url|link> injections."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int = SECTION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The alert notification events (daemon/alerts) and how a message opens.
EVENT_TITLES = {"alert.fired": "Alert fired", "alert.test": "Test notification", "behavior.breached": "Behavior breached",
                "behavior.recovered": "Behavior recovered"}


def summary_line(alert: dict[str, Any]) -> str:
    title = EVENT_TITLES.get(str(alert.get("event") or "alert.fired"), "Alert")
    name = alert.get("rule_name") or alert.get("rule_id") or "alert"
    experiment = alert.get("experiment_name") or alert.get("experiment_id")
    reason = alert.get("reason") or "its condition is true"
    return f"{title}: {name}" + (f" on {experiment}" if experiment else "") + f" - {reason}"


def fallback_text(alert: dict[str, Any]) -> str:
    """The message's plain `text` (notifications, clients without blocks)."""
    return _clip(escape(summary_line(alert)))


def span_fields(span: dict[str, Any] | None) -> list[dict[str, str]]:
    """The span card: model, tool, latency and cost, each only when known."""
    if not span:
        return []
    known = [("Model", span.get("model")), ("Tool", span.get("tool")),
             ("Latency", f"{span['duration_ms']} ms" if span.get("duration_ms") is not None else None),
             ("Cost", f"${span['cost_usd']:.4f}" if isinstance(span.get("cost_usd"), (int, float)) else None)]
    return [{"type": "mrkdwn", "text": _clip(f"*{label}*\n{escape(value)}", FIELD_CHARS)}
            for label, value in known if value not in (None, "")]


DEBUG_VALUE_CHARS = 300  # each string of the debug context, so that the most useful keys always fit
# Kept first when the context must shrink to fit a button value: the ids a debugger starts from.
DEBUG_KEYS = ("event", "rule_id", "experiment_id", "trace_id", "span_id", "status", "model", "tool", "duration_ms", "cost_usd",
              "metric_value", "threshold", "fired_at", "rule_name", "experiment_name", "reason")


def debug_context(alert: dict[str, Any], span: dict[str, Any] | None) -> str:
    """Plain JSON a user copies into a bug report or `svc investigate`: always valid JSON that fits a
    button value (long strings are clipped, then the least useful keys dropped)."""
    facts = {**{k: alert.get(k) for k in DEBUG_KEYS}, **({k: span.get(k) for k in DEBUG_KEYS if k in span} if span else {})}
    context = {k: _clip(facts[k], DEBUG_VALUE_CHARS) if isinstance(facts[k], str) else facts[k]
               for k in DEBUG_KEYS if facts.get(k) is not None}
    text = json.dumps(context, separators=(",", ":"), default=str)
    while len(text) > BUTTON_VALUE_CHARS:
        context.pop(list(context)[-1])
        text = json.dumps(context, separators=(",", ":"), default=str)
    return text


def alert_blocks(alert: dict[str, Any], span: dict[str, Any] | None, diagnosis: str | None, link: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(":rotating_light: " + escape(summary_line(alert)))}},
    ]
    fields = span_fields(span)
    if fields:
        blocks.append({"type": "section", "fields": fields})
    if diagnosis:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip("*Diagnosis*\n" + escape(diagnosis))}})
    blocks.append({"type": "actions", "elements": [
        {"type": "button", "action_id": "svc_open_trace", "text": {"type": "plain_text", "text": "Open trace"}, "url": link},
        {"type": "button", "action_id": DEBUG_ACTION, "text": {"type": "plain_text", "text": "Copy debug context"},
         "value": debug_context(alert, span)},
    ]})
    return blocks
