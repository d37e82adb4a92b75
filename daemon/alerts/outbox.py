"""Notification rows for the durable outbox.

A row is written in the same transaction as the decision that fires it (a rule's evaluation, a
behavior latch flip), so a notification is never decided without being queued, nor queued twice:
its `dedup_key` is unique (`alert:<rule>:<experiment>:<5-minute bucket>`, `behavior:<id>:<flip n>`).
The delivery worker (daemon/alerts/delivery.py) sends it later, from the table alone.
"""
from __future__ import annotations

import time
from typing import Any

from daemon.alerts.messages import is_slack_webhook
from daemon.util import new_id, now_iso


def route(owner: Any) -> tuple[str, str | None]:
    """(channel, destination) of a rule or behavior row: webhook, slack (incoming webhook), chat or email."""
    if owner["notify"] == "webhook":
        return ("slack" if is_slack_webhook(owner["webhook_url"]) else "webhook"), owner["webhook_url"]
    if owner["notify"] == "chat":
        return "chat", owner["slack_channel"]
    return "email", owner["email_to"]


def notification(owner: Any, event: str, dedup_key: str, payload: dict[str, Any], *, rule_id: str | None = None,
                 behavior_id: str | None = None, experiment_id: str | None = None, default_route: Any = None) -> dict[str, Any]:
    """The row for `owner`'s routing, or for the tenant's `default_route` when given (a behavior without `notify`)."""
    channel, destination = route(default_route if default_route is not None else owner)
    return {"id": new_id("ntf_"), "tenant_id": owner["tenant_id"], "rule_id": rule_id, "behavior_id": behavior_id,
            "event": event, "dedup_key": dedup_key, "experiment_id": experiment_id, "channel": channel,
            "destination": destination, "payload": payload, "next_attempt_at": time.time(), "created_at": now_iso(),
            "routed": "owner" if default_route is None else "default"}
