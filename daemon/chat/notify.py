"""Chat alerts (`notify: chat`): the SPEC block message posted with the tenant's bot.

    ChatUnavailable: the tenant has no installation and SERVICE_CHAT_BOT_TOKEN does not serve it.
    ChatSendError(retryable): Slack refused the message or could not be reached.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from daemon.chat import blocks, slack
from daemon.investigate import llm
from daemon.store import chat as chat_store
from daemon.store import investigate as views
from daemon.appkeys import DEFAULT_TENANT_ID, SETTINGS, STORE

log = logging.getLogger("svcd.chat")
DIAGNOSIS_TOKENS = 300
DIAGNOSIS_TIMEOUT_S = 20


class ChatUnavailable(Exception):
    """No installation and no bot token for this tenant."""


class ChatSendError(Exception):
    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


async def server_bot_serves(app: Any, tenant_id: str) -> bool:
    """Whether SERVICE_CHAT_BOT_TOKEN may post for `tenant_id`: only for the one tenant
    SERVICE_CHAT_BOT_TENANT names (default: the admin tenant), so no other tenant reaches its workspace."""
    settings = app[SETTINGS]
    if not settings.chat_bot_token:
        return False
    return await chat_store.tenant_is(app[STORE], tenant_id, settings.chat_bot_tenant or app[DEFAULT_TENANT_ID])


async def bot_token(app: Any, tenant_id: str) -> str:
    """The tenant's installed bot token, else SERVICE_CHAT_BOT_TOKEN when it serves this tenant."""
    installation = await chat_store.installation_for_tenant(app[STORE], tenant_id)
    if installation:
        return installation["bot_token"]
    if await server_bot_serves(app, tenant_id):
        return app[SETTINGS].chat_bot_token
    raise ChatUnavailable("team chat is not installed for this tenant: install it (svc chat install-url); "
                          "SERVICE_CHAT_BOT_TOKEN posts only for the tenant SERVICE_CHAT_BOT_TENANT names")


def deep_link(app: Any, alert: dict[str, Any], span: dict[str, Any] | None) -> str:
    base = app[SETTINGS].chat_link_base.rstrip("/") or f"http://127.0.0.1:{app[SETTINGS].port}"
    if span and span.get("trace_id"):
        return f"{base}/v1/traces/{span['trace_id']}"
    if alert.get("experiment_id"):
        return f"{base}/v1/experiments/{alert['experiment_id']}"
    return f"{base}/v1/alerts"


async def diagnose(app: Any, alert: dict[str, Any], span: dict[str, Any] | None) -> str | None:
    """A short generated diagnosis, or None when no model is configured or it fails (the message
    then goes without one: an alert is never held back by the model)."""
    model = llm.from_settings(app[SETTINGS])
    if model is None:
        return None
    model.timeout_s = DIAGNOSIS_TIMEOUT_S
    facts = {"alert": {k: v for k, v in alert.items() if isinstance(v, (str, int, float, bool)) or v is None}, "span": span}
    messages = [
        {"role": "system", "content": "You diagnose failing AI-agent evaluations. In at most three sentences, say the most "
                                      "likely cause from the facts given, citing ids. Say so when the facts are not enough."},
        {"role": "user", "content": json.dumps(facts, default=str)[:8000]},
    ]
    try:
        message, _ = await llm.complete(model, messages, max_tokens=DIAGNOSIS_TOKENS)
    except llm.ModelError as exc:
        log.warning("chat alert diagnosis skipped: %s", exc.code)
        return None
    content = message.get("content")
    return content.strip() if isinstance(content, str) and content.strip() else None


async def post_alert(app: Any, tenant_id: str, channel: str | None, alert: dict) -> None:
    token = await bot_token(app, tenant_id)
    if not channel:
        raise ChatSendError("no chat channel: set the rule's slack_channel", retryable=False)
    experiment_id = alert.get("experiment_id")
    span = await views.alert_span(app[STORE], tenant_id, experiment_id) if isinstance(experiment_id, str) else None
    diagnosis = await diagnose(app, alert, span)
    message = blocks.alert_blocks(alert, span, diagnosis, deep_link(app, alert, span))
    try:
        await slack.call(app[SETTINGS].chat_api_base, token, "chat_postMessage", channel=channel,
                         text=blocks.fallback_text(alert), blocks=message)
    except slack.SlackError as exc:
        raise ChatSendError(str(exc), exc.retryable) from None
