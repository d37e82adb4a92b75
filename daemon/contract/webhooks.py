"""Webhook destinations and their delivery log."""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from daemon.contract.alerts import PORT
from daemon.contract.common import Request, Response

EVENTS = ("run.completed", "replica.completed")
# A host name, an IPv4 address or a bracketed IPv6 one (with its zone, %25-escaped), a port up to
# 65535, any printable ASCII path; the daemon then checks where it leads (daemon/netguard.py).
URL_PATTERN = (r"^https?://(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%25[A-Za-z0-9._~-]+)?\])(?::" + PORT
               + r")?(?:[/?#][!-~]*)?$")


class WebhookCreate(Request):
    url: str = Field(description="http:// or https:// destination", json_schema_extra={"pattern": URL_PATTERN})
    events: list[Literal["run.completed", "replica.completed"]] = Field(default_factory=lambda: list(EVENTS), min_length=1)
    secret: str | None = Field(default=None, min_length=8, max_length=256, description="signing secret; generated when omitted")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(URL_PATTERN, value):
            raise ValueError("url must be an http:// or https:// URL: a host name, an IPv4 address or a bracketed IPv6 "
                             "address, a port up to 65535, and a path of printable ASCII without spaces")
        return value


class Webhook(Response):
    id: str
    url: str
    events: list[str]
    secret_prefix: str
    secret: str | None = Field(default=None, description="only in the creation response")
    created_at: str


class Delivery(Response):
    id: str
    webhook_id: str
    event: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    response_status: int | None
    error: str | None
    created_at: str
    last_attempt_at: str | None
    delivered_at: str | None
    payload: dict[str, Any]
