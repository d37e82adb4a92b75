"""Webhook destinations: register, list, delete, and the delivery log."""
from __future__ import annotations

import json
import re
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator

from daemon.errors import Forbidden, InvalidRequest, NotFound
from daemon.http import Routes, json_response, paginate, parse_body
from daemon.netguard import UnsafeURL, check_outbound_url
from daemon.util import new_id, now_iso
from daemon.webhooks import EVENTS, Dispatcher, delivery_body, hook_body, new_secret

routes = Routes("webhooks")


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(description="http:// or https:// destination")
    events: list[Literal["run.completed", "replica.completed"]] = Field(default_factory=lambda: list(EVENTS), min_length=1)
    secret: str | None = Field(default=None, min_length=8, max_length=256, description="signing secret; generated when omitted")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("url must be an http:// or https:// URL")
        return value


class Webhook(BaseModel):
    id: str
    url: str
    events: list[str]
    secret_prefix: str
    secret: str | None = Field(default=None, description="only in the creation response")
    created_at: str


class Delivery(BaseModel):
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
    payload: dict


async def _owned(request: web.Request) -> dict:
    hook_id = request.match_info["webhook_id"]
    row = await request.app["store"].fetchone("SELECT * FROM webhooks WHERE id = ?", (hook_id,))
    if row is None:
        raise NotFound("webhook", hook_id)
    if row["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"webhook '{hook_id}' belongs to another tenant")
    return row


@routes.post("/v1/webhooks", "Register a webhook destination (the secret is shown once)", body=WebhookCreate, response=Webhook, status=201,
             secret_once="webhook", description=(
                 "The signing secret is in this answer only. With an `Idempotency-Key`, the daemon keeps only which webhook "
                 "the request created, not the answer: a replay answers 409 `conflict` with `details: {state: "
                 "\"secret_shown_once\", resource: \"webhook\", id}`. The URL must not resolve to a link-local or cloud "
                 "metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, metadata.google.internal): 400 naming `url`; "
                 "loopback is allowed. The check runs again at every delivery, which is refused without sending."))
async def create_webhook(request: web.Request) -> web.Response:
    body = await parse_body(request, WebhookCreate)
    try:
        await check_outbound_url(body.url)
    except UnsafeURL as exc:
        raise InvalidRequest(f"url: {exc}; the daemon never calls link-local or cloud metadata addresses",
                             [{"loc": "url", "msg": str(exc)}])
    hook_id = new_id("wh_")
    events = sorted(set(body.events), key=EVENTS.index)
    await request.app["store"].execute(
        "INSERT INTO webhooks (id, tenant_id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (hook_id, request["tenant_id"], body.url, json.dumps(events), body.secret or new_secret(), now_iso()),
    )
    row = await request.app["store"].fetchone("SELECT * FROM webhooks WHERE id = ?", (hook_id,))
    return json_response(hook_body(row, secret=True), status=201)


@routes.get("/v1/webhooks", "List webhook destinations", response=Webhook, paginated=True)
async def list_webhooks(request: web.Request) -> web.Response:
    page = await paginate(request.app["store"], "SELECT * FROM webhooks WHERE tenant_id = ?", [request["tenant_id"]], request, hook_body)
    return json_response(page)


@routes.get("/v1/webhooks/{webhook_id}", "One webhook destination", response=Webhook)
async def get_webhook(request: web.Request) -> web.Response:
    return json_response(hook_body(await _owned(request)))


@routes.delete("/v1/webhooks/{webhook_id}", "Delete a webhook destination and its delivery log")
async def delete_webhook(request: web.Request) -> web.Response:
    row = await _owned(request)
    await request.app["store"].execute("DELETE FROM webhooks WHERE id = ?", (row["id"],))
    return web.Response(status=204)


@routes.get("/v1/webhooks/{webhook_id}/deliveries", "Delivery log of a webhook, newest first", response=Delivery, paginated=True)
async def list_deliveries(request: web.Request) -> web.Response:
    row = await _owned(request)
    page = await paginate(
        request.app["store"], "SELECT * FROM webhook_deliveries WHERE webhook_id = ?", [row["id"]], request, delivery_body
    )
    return json_response(page)


def setup(app: web.Application) -> None:
    async def ctx(app: web.Application):
        dispatcher = Dispatcher(app)
        app["webhooks"] = dispatcher
        await dispatcher.resume_pending()
        yield
        await dispatcher.close()

    app.cleanup_ctx.append(ctx)

