"""Alert rules on experiment metrics, and the notifications (deliveries) they and behaviors send."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from daemon.contract.common import PageQuery, Request, Response

MAX_ALERTS_PER_TENANT = 50
# A host name or IPv4 address, a port up to 65535, any printable ASCII path.
PORT = r"([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
URL_PATTERN = r"^https?://[A-Za-z0-9._~-]+(?::" + PORT + r")?(?:[/?#][!-~]*)?$"
EMAIL_PATTERN = r"^[A-Za-z0-9._%+'-]{1,64}@[A-Za-z0-9.-]{1,190}$"
CHANNEL_PATTERN = r"^[#@]?[A-Za-z0-9._-]{1,80}$"
NAME = Field(min_length=1, max_length=200)
METRICS = ("pass_rate", "mean_wall_ms", "p95_wall_ms", "total_cost_usd", "mean_cost_per_run_usd", "tool_success_rate",
           "side_effect_violations", "mean_tool_calls")
# What the daemon parses (daemon/alerts/conditions.py), as a pattern so the document says it too.
# (spaces and tabs only: `\s` means different characters to JSON Schema and to Python)
CONDITION_PATTERN = (r"^[ \t]*(" + "|".join(METRICS) + r")[ \t]*(<=|>=|==|!=|<|>)[ \t]*[-+]?([0-9]{1,15}(\.[0-9]{0,15})?|\.[0-9]{1,15})"
                     r"([eE][-+]?[0-9]{1,2})?[ \t]*$")
WINDOW_PATTERN = (r"^last_(([1-9][0-9]?|100)_runs|([1-9][0-9]{0,2}|1[0-9]{3}|20[0-9]{2}|21[0-5][0-9]|2160)h"
                  r"|([1-9]|[1-8][0-9]|90)d)$")
# notify names the destination field it needs
DESTINATION_RULES = [{"if": {"properties": {"notify": {"const": notify}}, "required": ["notify"]},
                      "then": {"required": [field], "properties": {field: {"type": "string"}}}}
                     for notify, field in (("webhook", "webhook_url"), ("chat", "slack_channel"), ("email", "email_to"))]

Notify = Literal["webhook", "chat", "email"]


class Routing(Request):
    """Where a notification goes: `notify` plus the destination field it needs."""
    model_config = ConfigDict(extra="forbid", strict=True)

    notify: Notify
    webhook_url: str | None = Field(default=None, max_length=2000, pattern=URL_PATTERN,
                                    description="destination when notify is webhook (hooks.slack.com URLs get block messages)")
    slack_channel: str | None = Field(default=None, pattern=CHANNEL_PATTERN, description="destination channel when notify is chat")
    email_to: str | None = Field(default=None, pattern=EMAIL_PATTERN, description="destination address when notify is email")
    secret: str | None = Field(default=None, min_length=8, max_length=256,
                               description="webhook signing secret (X-Svc-Signature); generated when omitted, shown once")


class AlertCreate(Routing):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"allOf": DESTINATION_RULES})

    name: str = NAME
    condition: str = Field(min_length=1, max_length=200, pattern=CONDITION_PATTERN,
                           description="`<metric> <operator> <value>`, e.g. `pass_rate < 0.8`")
    eval_id: str | None = Field(default=None, min_length=1, max_length=200, description="scopes the rule to one spec; absent: every spec")
    window: str | None = Field(default=None, max_length=40, json_schema_extra={"pattern": WINDOW_PATTERN},
                               description="`last_<N>_runs` (N <= 100) or `last_<N>h` / `last_<N>d` (at most 90 days)")


class DefaultRoutePut(Routing):
    """The tenant's default route: where behaviors without their own `notify` send their notices."""
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"allOf": DESTINATION_RULES})


class DefaultRoute(Response):
    notify: Notify
    webhook_url: str | None
    slack_channel: str | None
    email_to: str | None
    updated_at: str
    secret: str | None = Field(default=None, description="webhook signing secret of this route: only in the PUT answer")


class AlertRule(Response):
    id: str
    name: str
    eval_id: str | None
    condition: str
    metric: str
    operator: str
    threshold: float
    window: str | None
    notify: Notify
    slack_channel: str | None
    webhook_url: str | None
    email_to: str | None
    created_at: str
    last_fired_at: str | None
    state: Literal["ok", "firing", "no_data"]
    source: Literal["api", "spec"] = Field(description="spec: declared by the `alerts:` of spec `eval_id`, replaced on each upload")
    secret: str | None = Field(default=None, description="webhook signing secret: only in the creation response")


class AlertListQuery(PageQuery):
    eval_id: str | None = Field(default=None, max_length=200)


class DeliveryAttempt(Response):
    attempt: int
    at: str
    response_status: int | None
    error: str | None


class AlertDelivery(Response):
    id: str
    rule_id: str | None
    behavior_id: str | None
    event: Literal["alert.fired", "alert.test", "behavior.breached", "behavior.recovered"]
    experiment_id: str | None
    channel: Literal["webhook", "slack", "chat", "email"]
    destination: str | None
    status: Literal["pending", "sent", "failed"]
    attempts: int
    last_error: str | None
    response_status: int | None
    created_at: str
    sent_at: str | None
    payload: dict[str, Any]
    attempt_log: list[DeliveryAttempt]


class AlertTestAccepted(Response):
    delivery: AlertDelivery
