"""Team chat (Slack): install URL and status (API key), OAuth callback (signed state), events
(Slack request signature), and the install confirmation page."""
from __future__ import annotations

import asyncio
import html
import logging
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlencode

from aiohttp import web

from daemon.chat import notify, oauth, signing, slack
from daemon.chat.bot import BOT, MAX_QUEUED, BotBusy, ChatBot
from daemon.contract.chat import (CallbackQuery, MAX_INTERACTION_CHARS)
from daemon.errors import AtCapacity, Conflict, InvalidRequest, PayloadTooLarge, Unauthorized
from daemon.contract import routes as R
from daemon.http import SETTINGS, STORE, Routes, decode_json
from daemon.investigate import llm
from daemon.store import chat as chat_store

routes = Routes("chat")
log = logging.getLogger("svcd.chat")
MAX_EVENT_BYTES = 256 * 1024  # Slack's event payloads are a few KB
MAX_FORM_FIELDS = 20  # an interaction is one field, `payload`
# Its form-encoded body: a UTF-8 character percent-encoded is at most 12 bytes.
MAX_INTERACTION_BYTES = 12 * MAX_INTERACTION_CHARS + 1024
CONFIRMATION_PATH = R.CHAT_INSTALLED.path
_HTML = {"description": "an HTML page", "content": {"text/html": {"schema": {"type": "string"}}}}


def _page(status: int, title: str, text: str) -> web.Response:
    body = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>")
    return web.Response(status=status, text=body, content_type="text/html")


def _invalid_state(why: str) -> web.Response:
    log.info("chat OAuth callback refused: %s state", why)
    return _page(403, "Invalid state", "This installation link is invalid, expired or already used. Ask svc for a new one "
                                        "(svc chat install-url / GET /v1/chat/install-url) and try again.")


@routes.get(R.CHAT_INSTALL_URL, "Slack OAuth authorize URL with a signed, single-use state",
            errors=(409,), typed=True, description=(
                "The state is HMAC-signed with a key derived from SERVICE_CHAT_CLIENT_SECRET, bound to this tenant, "
                "expires in 15 minutes and works once. 409 `conflict` (`state: not_configured`) when "
                "SERVICE_CHAT_CLIENT_ID or SERVICE_CHAT_CLIENT_SECRET is not set."))
async def install_url(request: web.Request) -> dict:
    tenant_id = request["tenant_id"]
    settings = request.app[SETTINGS]
    if not settings.chat_client_id or not settings.chat_client_secret:
        raise Conflict("team chat is not configured: set SERVICE_CHAT_CLIENT_ID and SERVICE_CHAT_CLIENT_SECRET", state="not_configured")
    state, nonce, expires_at = oauth.new_state(settings.chat_client_secret, tenant_id)
    await chat_store.add_state(request.app[STORE], nonce, tenant_id, expires_at)
    return {"url": oauth.authorize_url(settings.chat_authorize_url, settings.chat_client_id, state),
            "expires_at": datetime.fromtimestamp(expires_at, timezone.utc).isoformat().replace("+00:00", "Z")}


@routes.get(R.CHAT_OAUTH_CALLBACK, "Slack OAuth redirect: exchanges the code and maps the workspace to the tenant",
            auth=False, responses={"403": _HTML, "409": _HTML, "502": _HTML}, description=(
                "No API key: the signed state names the tenant. A bad, expired, reused or re-keyed state (or a declined "
                "install) answers a 403 'Invalid state' page and stores nothing. A good one exchanges the code with "
                "`oauth.v2.access`, upserts the workspace-to-tenant mapping with its bot token (stored like other secrets, "
                "never shown) and redirects (302) to the confirmation page with `?chat=installed`. 409 page, nothing stored, "
                "when the workspace is installed for another tenant (until Slack reports the app uninstalled there). 502 when "
                "Slack refuses the code or cannot be reached."))
async def oauth_callback(request: web.Request) -> web.Response:
    query: CallbackQuery = request["query"]
    settings = request.app[SETTINGS]
    try:
        nonce, tenant_id = oauth.check_state(settings.chat_client_secret, query.state)
    except oauth.InvalidState as exc:
        return _invalid_state(str(exc))
    if not query.code:
        return _page(403, "Installation not approved", "Slack did not approve the installation; nothing was stored.")
    if not await chat_store.consume_state(request.app[STORE], nonce, tenant_id):
        return _invalid_state("reused or unknown")
    try:
        answer = await slack.call(settings.chat_api_base, None, "oauth_v2_access", client_id=settings.chat_client_id,
                                  client_secret=settings.chat_client_secret, code=query.code)
    except slack.SlackError as exc:
        log.warning("chat install for tenant %s failed: %s", tenant_id, exc)
        return _page(502, "Installation failed", f"Slack did not complete the installation ({exc.error}); nothing was stored.")
    team = answer.get("team") if isinstance(answer.get("team"), dict) else {}
    token = answer.get("access_token")
    if not isinstance(team.get("id"), str) or not isinstance(token, str) or answer.get("token_type") != "bot":
        return _page(502, "Installation failed", "Slack's answer had no bot token for a workspace; nothing was stored.")
    mapped = await chat_store.installation_for_team(request.app[STORE], team["id"][:64])
    if mapped is not None and mapped["tenant_id"] != tenant_id:
        log.warning("chat install of workspace %s by tenant %s refused: it belongs to another tenant", team["id"], tenant_id)
        return _page(409, "Workspace already installed", "This Slack workspace is installed for another svc tenant; nothing "
                                                          "was stored. Uninstall the app from the workspace first, then install again.")
    await chat_store.upsert_installation(
        request.app[STORE], team_id=team["id"][:64], team_name=str(team.get("name") or "")[:200] or None, tenant_id=tenant_id,
        app_id=str(answer.get("app_id") or "")[:64] or None, bot_user_id=str(answer.get("bot_user_id") or "")[:64] or None,
        bot_token=token, scope=str(answer.get("scope") or "")[:1000] or None)
    log.info("chat installed: workspace %s -> tenant %s", team["id"], tenant_id)
    return web.Response(status=302, headers={"Location": CONFIRMATION_PATH + "?" + urlencode({"chat": "installed", "team": team["id"]})})


@routes.get(R.CHAT_INSTALLED, "Install confirmation page", auth=False, responses={"200": _HTML})
async def installed(request: web.Request) -> web.Response:
    return _page(200, "svc is installed", "Invite the svc bot to a channel (/invite @svc) and mention it with a question.")


async def _raw_body(request: web.Request, limit: int = MAX_EVENT_BYTES) -> bytes:
    """The body exactly as sent (the signature covers these bytes), at most `limit` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(limit)
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


@routes.post(R.CHAT_EVENTS, "Slack Events API: URL verification and app_mention events", auth=False, errors=(401, 503), typed=True, raw_body=True, description=(
                 "No API key: `X-Slack-Signature` must be `v0=` hex HMAC-SHA256 (SERVICE_CHAT_SIGNING_SECRET) of "
                 "`v0:<X-Slack-Request-Timestamp>:<raw body>`, the timestamp within 5 minutes; otherwise 401 and nothing "
                 f"happens. Bodies over {MAX_EVENT_BYTES} bytes: 413. `url_verification` answers `{{challenge}}`. An "
                 "`event_callback` is acknowledged at once (`{ok: true}`) and handled in the background, once per "
                 "`event_id` and per team+channel+ts (Slack's retries add nothing); `app_uninstalled` (or `tokens_revoked` "
                 "naming bot tokens) removes the workspace's mapping and bot token. 503 `at_capacity` when "
                 f"{MAX_QUEUED} events are already waiting (Slack delivers again later)."))
async def events(request: web.Request) -> dict:
    raw = await _signed_body(request)
    payload = decode_json(raw)
    if not isinstance(payload, dict):
        raise InvalidRequest("the event body must be a JSON object", [{"loc": "body", "msg": "not an object"}])
    kind = payload.get("type")
    if kind == "url_verification":
        challenge = payload.get("challenge")
        if not isinstance(challenge, str) or len(challenge) > 256:
            raise InvalidRequest("challenge: expected a string of at most 256 characters", [{"loc": "challenge", "msg": "invalid"}])
        return {"challenge": challenge}
    if kind == "event_callback":
        await _accept(request.app, payload)
    return {"ok": True}


@routes.post(R.CHAT_INTERACTIONS, "Slack interactivity: clicks on the buttons of the bot's messages", auth=False, errors=(401, 503),
             typed=True, description=(
                 f"Signed like `/v1/chat/events` (401 otherwise); `payload` is at most {MAX_INTERACTION_CHARS} characters "
                 "(400 naming it). Acknowledged at once (`{{ok: true}}`); a click on an alert's "
                 "'Copy debug context' button then posts the debug context as plain JSON in that message's thread, "
                 "with the workspace's bot. 503 `at_capacity` as for events."))
async def interactions(request: web.Request) -> dict:
    raw = await _signed_body(request, MAX_INTERACTION_BYTES)
    try:
        form = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        raise InvalidRequest(f"the form has more than {MAX_FORM_FIELDS} fields", [{"loc": "body", "msg": "too many fields"}])
    text = form.get("payload", [""])[0]
    if len(text) > MAX_INTERACTION_CHARS:
        raise InvalidRequest(f"payload: at most {MAX_INTERACTION_CHARS} characters", [{"loc": "payload", "msg": "too long"}])
    payload = decode_json(text, what="payload", loc="payload")
    if not isinstance(payload, dict):
        raise InvalidRequest("payload: expected a JSON object", [{"loc": "payload", "msg": "not an object"}])
    if payload.get("type") == "block_actions":
        try:
            request.app[BOT].accept(payload)
        except BotBusy:
            raise AtCapacity(MAX_QUEUED, what="chat event")
    return {"ok": True}


async def _signed_body(request: web.Request, limit: int = MAX_EVENT_BYTES) -> bytes:
    """The raw body of a request Slack signed within the replay window; 401 otherwise."""
    raw = await _raw_body(request, limit)
    if not signing.is_signed(request.app[SETTINGS].chat_signing_secret, raw, request.headers.get("X-Slack-Request-Timestamp"),
                             request.headers.get("X-Slack-Signature")):
        raise Unauthorized("invalid Slack request signature (or a timestamp outside the 5-minute window)")
    return raw


async def _accept(app: web.Application, payload: dict) -> None:
    event, event_id, team_id = payload.get("event"), payload.get("event_id"), payload.get("team_id")
    if isinstance(event, dict) and isinstance(event_id, str) and isinstance(team_id, str):
        try:
            app[BOT].accept(payload)  # deduplicated by the bot, so the answer waits for no database write
        except BotBusy:
            raise AtCapacity(MAX_QUEUED, what="chat event")


@routes.get(R.CHAT_STATUS, "Installed workspaces (each bot token checked with Slack's auth.test) and the chat configuration", typed=True)
async def status(request: web.Request) -> dict:
    tenant_id = request["tenant_id"]
    settings = request.app[SETTINGS]
    rows = await chat_store.installations(request.app[STORE], tenant_id)
    keys = ("team_id", "team_name", "app_id", "bot_user_id", "scope", "installed_at", "updated_at", "last_event_at")
    seen = [r["last_event_at"] for r in rows if r["last_event_at"]]
    checks = await asyncio.gather(*[_bot_check(request.app, r["team_id"]) for r in rows])
    return {"installations": [{**{k: r[k] for k in keys}, **check} for r, check in zip(rows, checks)],
            "oauth_configured": bool(settings.chat_client_id and settings.chat_client_secret),
            "events_configured": bool(settings.chat_signing_secret), "server_bot_token": await notify.server_bot_serves(request.app, tenant_id),
            "agent_configured": llm.from_settings(settings) is not None, "last_event_at": max(seen) if seen else None}


async def _bot_check(app: web.Application, team_id: str) -> dict:
    """Whether Slack still accepts the workspace's bot token (auth.test)."""
    installation = await chat_store.installation_for_team(app[STORE], team_id)
    try:
        await slack.call(app[SETTINGS].chat_api_base, installation["bot_token"] if installation else "", "auth_test")
    except slack.SlackError as exc:
        return {"bot_ok": False, "bot_error": exc.error}
    return {"bot_ok": True, "bot_error": None}


def setup(app: web.Application) -> None:
    bot = ChatBot(app)
    app[BOT] = bot

    async def ctx(app: web.Application):
        async def purge() -> None:
            while True:
                try:
                    await chat_store.purge_states(app[STORE], time.time() - 3600)
                    cutoff = (datetime.now(timezone.utc) - timedelta(days=2)).isoformat().replace("+00:00", "Z")
                    await chat_store.purge_events(app[STORE], cutoff)
                except Exception:
                    log.exception("chat housekeeping failed")
                await asyncio.sleep(3600)

        task = asyncio.create_task(purge())
        bot.start()
        yield
        task.cancel()
        await bot.close()

    app.cleanup_ctx.append(ctx)
