"""Webhook destinations: register, list, delete, and the delivery log."""
from __future__ import annotations

import json

from aiohttp import web

from daemon.contract.common import Page
from daemon.contract.webhooks import Delivery, Webhook, WebhookCreate
from daemon.errors import Forbidden, InvalidRequest, NotFound
from daemon.contract import routes as R
from daemon.http import STORE, Routes, page_of, page_params
from daemon.store import webhooks as hook_store
from daemon.netguard import ALLOW_HINT, UnsafeURL, check_outbound_url
from daemon.util import new_id, now_iso
from daemon.webhooks import EVENTS, WEBHOOKS, Dispatcher, delivery_body, hook_body, new_secret

routes = Routes("webhooks")


async def _owned(request: web.Request) -> dict:
    hook_id = request.match_info["webhook_id"]
    row = await hook_store.get(request.app[STORE], hook_id)
    if row is None:
        raise NotFound("webhook", hook_id)
    if row["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"webhook '{hook_id}' belongs to another tenant")
    return row


@routes.post(R.CREATE_WEBHOOK, "Register a webhook destination (the secret is shown once)",
             secret_once="webhook", description=(
                 "The signing secret is in this answer only. With an `Idempotency-Key`, the daemon keeps only which webhook "
                 "the request created, not the answer: a replay answers 409 `conflict` with `details: {state: "
                 "\"secret_shown_once\", resource: \"webhook\", id}`. The URL must not resolve to a link-local or cloud "
                 "metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, metadata.google.internal), nor, unless the "
                 "operator sets SERVICE_OUTBOUND_ALLOW_PRIVATE=1, to a loopback, private or this host's address: 400 naming "
                 "`url`. The check runs again at every delivery, which is refused without sending; a delivery without an "
                 "HTTP answer records the same error whatever the cause."), typed=True)
async def create_webhook(request: web.Request) -> Webhook:
    body: WebhookCreate = request["body"]
    try:
        await check_outbound_url(body.url)
    except UnsafeURL as exc:
        raise InvalidRequest(f"url: {exc}; {ALLOW_HINT}",
                             [{"loc": "url", "msg": str(exc)}])
    hook_id = new_id("wh_")
    events = sorted(set(body.events), key=EVENTS.index)
    await hook_store.insert(request.app[STORE], hook_id=hook_id, tenant_id=request["tenant_id"], url=body.url,
                            events=json.dumps(events), secret=body.secret or new_secret(), created_at=now_iso())
    row = await hook_store.get(request.app[STORE], hook_id)
    return Webhook.model_validate(hook_body(row, secret=True))


@routes.get(R.LIST_WEBHOOKS, "List webhook destinations")
async def list_webhooks(request: web.Request) -> Page[Webhook]:
    return page_of(await hook_store.page(request.app[STORE], request["tenant_id"], *page_params(request)), hook_body)


@routes.get(R.GET_WEBHOOK, "One webhook destination", typed=True)
async def get_webhook(request: web.Request) -> Webhook:
    return Webhook.model_validate(hook_body(await _owned(request)))


@routes.delete(R.DELETE_WEBHOOK, "Delete a webhook destination and its delivery log")
async def delete_webhook(request: web.Request) -> web.Response:
    row = await _owned(request)
    await hook_store.delete(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.get(R.LIST_WEBHOOK_DELIVERIES, "Delivery log of a webhook, newest first")
async def list_deliveries(request: web.Request) -> Page[Delivery]:
    row = await _owned(request)
    return page_of(await hook_store.delivery_page(request.app[STORE], row["id"], *page_params(request)), delivery_body)


def setup(app: web.Application) -> None:
    async def ctx(app: web.Application):
        dispatcher = Dispatcher(app)
        app[WEBHOOKS] = dispatcher
        await dispatcher.resume_pending()
        yield
        await dispatcher.close()

    app.cleanup_ctx.append(ctx)

