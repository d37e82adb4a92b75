"""What a notification says: SPEC's webhook body, its chat block message and its email text."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

SLACK_WEBHOOK_HOSTS = ("hooks.slack.com",)
TITLES = {"alert.fired": "Alert fired", "alert.test": "Test notification", "behavior.breached": "Behavior breached",
          "behavior.recovered": "Behavior recovered"}


def body(rule_id: str, rule_name: str, reason: str, experiment_id: str | None, experiment_name: str | None,
         fired_at: str, metric_value: float | None, threshold: float) -> dict[str, Any]:
    """SPEC "Alert rule": the webhook notification body, exactly these keys."""
    return {"rule_id": rule_id, "rule_name": rule_name, "reason": reason, "experiment_id": experiment_id,
            "experiment_name": experiment_name, "fired_at": fired_at, "metric_value": metric_value, "threshold": threshold}


def is_slack_webhook(url: str | None) -> bool:
    """Incoming-webhook URLs of the chat product get block messages instead of the raw JSON."""
    if not url:
        return False
    parts = urlsplit(url)
    return parts.scheme == "https" and (parts.hostname or "") in SLACK_WEBHOOK_HOSTS


def summary_line(event: str, payload: dict[str, Any]) -> str:
    return f"{TITLES.get(event, event)}: {payload['rule_name']} - {payload['reason']}"


def _literal(text: Any) -> str:
    """Tenant text (rule and experiment names) as literal mrkdwn: a name like '<!channel>' pings nobody."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def blocks(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A chat block message: the one-line summary, then the numbers as fields."""
    fields = [f"*Value*\n{payload['metric_value']}", f"*Threshold*\n{payload['threshold']}", f"*Fired at*\n{payload['fired_at']}"]
    if payload.get("experiment_id"):
        fields.append(f"*Experiment*\n{_literal(payload.get('experiment_name') or '')} (`{payload['experiment_id']}`)")
    return {
        "text": _literal(summary_line(event, payload)),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": TITLES.get(event, event)[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_literal(payload['rule_name'])}*: {_literal(payload['reason'])}"[:3000]}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": f[:2000]} for f in fields]},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"rule `{payload['rule_id']}`"}]},
        ],
    }


def email_text(event: str, payload: dict[str, Any]) -> tuple[str, str]:
    """(subject, plain text body)."""
    lines = [summary_line(event, payload), ""] + [f"{key}: {payload.get(key)}" for key in payload]
    return f"[svc] {summary_line(event, payload)}"[:200], "\n".join(lines) + "\n"
