"""The chat bot: Slack events accepted by POST /v1/chat/events are handled here, in the background.

A mention in a thread is a question to the investigation agent in the conversation tagged
`metadata.chat_key = '<team>:<channel>:<thread_ts>'` (created by the first mention, resumed by the
later ones); the answer goes back into that thread. The bot acts for the tenant that installed the
workspace and sees only that tenant's data.
"""
from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from aiohttp import web

from daemon.chat import slack
from daemon.chat.blocks import BUTTON_VALUE_CHARS, DEBUG_ACTION, escape
from daemon.investigate import conversations as investigate
from daemon.store import chat as chat_store
from daemon.store import conversations as store_conversations
from daemon.appkeys import SETTINGS, STORE

log = logging.getLogger("svcd.chat")
WORKERS = 8  # events handled at once (each may wait on the model for a while)
MAX_QUEUED = 1000  # events waiting; beyond it the endpoint answers 503 and Slack retries later
REPLY_CHARS = 3900
REPLY_RETRIES = 2  # a reply Slack rate-limits (429) is posted again after its Retry-After: the answer is not lost
THREAD_CONTEXT_MESSAGES = 20  # earlier thread messages given with a first mid-thread mention
THREAD_CONTEXT_CHARS = 3000
MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
HELP = ("Ask me about your evaluations and I will look at this workspace's svc data: experiments, failing scenarios, "
        "invariant evidence, traces and spans, scores, comparisons and reproducers. For example: "
        "`@svc why did exp-123 fail?` or `@svc compare exp-1 with exp-2`. Mention me again in this thread to follow up.")


def question_of(text: Any) -> str:
    """The mention's text without the bot's (or anyone's) `<@U...>` mention."""
    return MENTION.sub("", text if isinstance(text, str) else "").strip()


class BotBusy(Exception):
    """MAX_QUEUED events are waiting: the events endpoint answers 503 so Slack delivers again later."""


class ChatBot:
    """A bounded queue of accepted events and WORKERS tasks handling them."""

    def __init__(self, app: web.Application):
        self.app = app
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(MAX_QUEUED)
        self.workers: list[asyncio.Task] = []
        self.busy = 0
        self.server_team: str | None = None  # the workspace of SERVICE_CHAT_BOT_TOKEN, once auth.test said

    def accept(self, payload: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(payload)
        except asyncio.QueueFull:
            raise BotBusy(f"{MAX_QUEUED} chat events are waiting") from None

    def idle(self) -> bool:
        return self.queue.empty() and self.busy == 0

    def start(self) -> None:
        self.workers = [asyncio.create_task(self._work()) for _ in range(WORKERS)]

    async def close(self) -> None:
        for task in self.workers:
            task.cancel()
        await asyncio.gather(*self.workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            payload = await self.queue.get()
            self.busy += 1
            try:
                await self._guarded(payload)
            finally:
                self.busy -= 1

    async def _guarded(self, payload: dict[str, Any]) -> None:
        try:
            await self.handle(payload)
        except asyncio.CancelledError:
            raise
        except slack.SlackError as exc:
            log.warning("chat event %s: %s", payload.get("event_id"), exc)
        except Exception:
            log.exception("chat event %s failed", payload.get("event_id"))

    async def handle(self, payload: dict[str, Any]) -> None:
        if payload.get("type") == "block_actions":
            return await self.handle_action(payload)
        store = self.app[STORE]
        team_id, event, event_id = payload.get("team_id"), payload.get("event"), payload.get("event_id")
        if not isinstance(team_id, str) or not isinstance(event, dict) or not isinstance(event_id, str):
            return
        channel, ts = event.get("channel"), event.get("ts")
        message_key = f"{team_id}:{channel}:{ts}"[:300] if isinstance(channel, str) and isinstance(ts, str) else None
        if not await chat_store.record_event(store, event_id=event_id[:128], message_key=message_key, team_id=team_id[:64],
                                             event_type=str(event.get("type"))[:64]):
            return  # a retry or a duplicate delivery: handled once already
        installation = await chat_store.installation_for_team(store, team_id)
        if installation is None:
            log.info("chat event %s from workspace %s, which is not installed: ignored", payload.get("event_id"), team_id)
            return
        await chat_store.touch_event(store, team_id)
        if _uninstalled(event):
            await chat_store.remove_installation(store, team_id)
            log.info("chat: the app was uninstalled from workspace %s; its mapping and bot token are removed", team_id)
            return
        if event.get("type") != "app_mention" or event.get("bot_id") or event.get("user") == installation["bot_user_id"]:
            return  # not a mention, or the bot's own message
        if not isinstance(channel, str) or not isinstance(ts, str):
            return
        thread_ts = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else ts
        question = question_of(event.get("text"))
        reply = await self.answer(installation, channel, ts, thread_ts, question) if question else HELP
        await slack.call(self.app[SETTINGS].chat_api_base, installation["bot_token"], "chat_postMessage",
                         rate_limit_retries=REPLY_RETRIES, channel=channel, thread_ts=thread_ts, text=reply[:REPLY_CHARS])

    async def answer(self, installation: dict[str, Any], channel: str, ts: str, thread_ts: str, question: str) -> str:
        store, tenant_id = self.app[STORE], installation["tenant_id"]
        chat_key = f"{installation['team_id']}:{channel}:{thread_ts}"
        conversation = await store_conversations.for_chat_key(store, tenant_id, chat_key, question[:80], {
            "team_id": installation["team_id"], "channel": channel, "thread_ts": thread_ts})
        if ts != thread_ts and await store_conversations.message_count(store, conversation["id"]) == 0:
            question = await self.thread_context(installation, channel, thread_ts, ts) + question
        try:
            _, answered = await investigate.install(self.app).ask(tenant_id, conversation["id"], question[-investigate.MAX_QUESTION_CHARS:])
        except investigate.NotConfigured:
            return "The investigation agent is not configured on this svc server (no model: SERVICE_LLM_BASE_URL)."
        return escape(answered["content"])

    async def thread_context(self, installation: dict[str, Any], channel: str, thread_ts: str, mention_ts: str) -> str:
        """The thread's earlier messages (conversations.replies) when the bot is first mentioned
        mid-thread: the question usually refers to them. Empty when Slack does not give them."""
        try:
            answer = await slack.call(self.app[SETTINGS].chat_api_base, installation["bot_token"], "conversations_replies",
                                      channel=channel, ts=thread_ts, limit=THREAD_CONTEXT_MESSAGES)
        except slack.SlackError as exc:
            log.info("thread context unavailable: %s", exc)
            return ""
        lines = [f"{m.get('user') or 'someone'}: {question_of(m.get('text'))}" for m in answer.get("messages") or []
                 if isinstance(m, dict) and m.get("ts") != mention_ts]
        text = "\n".join(lines[-THREAD_CONTEXT_MESSAGES:])[-THREAD_CONTEXT_CHARS:]
        return f"Earlier in this Slack thread:\n{text}\n\nQuestion: " if text else ""


    async def handle_action(self, payload: dict[str, Any]) -> None:
        """A click on a button of the alert message: "Copy debug context" posts the context as plain
        JSON in the message's thread, where Slack lets it be copied. Other buttons (links) need nothing."""
        team, channel = _id_of(payload.get("team")), _id_of(payload.get("channel"))
        message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
        container = payload.get("container") if isinstance(payload.get("container"), dict) else {}
        message_ts = container.get("message_ts") or message.get("ts")
        values = [a.get("value") for a in payload.get("actions") or []
                  if isinstance(a, dict) and a.get("action_id") == DEBUG_ACTION and isinstance(a.get("value"), str)]
        if not values or not team or not channel or not isinstance(message_ts, str):
            return
        token = await self.token_for_team(team)
        if token is None:
            log.info("chat button click from workspace %s, which has no bot here: ignored", team)
            return
        thread_ts = message.get("thread_ts") if isinstance(message.get("thread_ts"), str) else message_ts
        await slack.call(self.app[SETTINGS].chat_api_base, token, "chat_postMessage", channel=channel, thread_ts=thread_ts,
                         text="Debug context (plain JSON):\n```" + escape(values[0][:BUTTON_VALUE_CHARS]) + "```")

    async def token_for_team(self, team_id: str) -> str | None:
        """The bot token for a workspace: its installation's, or SERVICE_CHAT_BOT_TOKEN's when that
        token belongs to this workspace (Slack's auth.test says which, asked once)."""
        installation = await chat_store.installation_for_team(self.app[STORE], team_id)
        if installation is not None:
            return installation["bot_token"]
        settings = self.app[SETTINGS]
        if not settings.chat_bot_token:
            return None
        if self.server_team is None:
            try:
                answer = await slack.call(settings.chat_api_base, settings.chat_bot_token, "auth_test")
            except slack.SlackError as exc:
                log.warning("SERVICE_CHAT_BOT_TOKEN: %s", exc)
                return None
            self.server_team = str(answer.get("team_id") or "")
        return settings.chat_bot_token if self.server_team == team_id else None


def _uninstalled(event: dict[str, Any]) -> bool:
    """Slack says the bot token no longer works in the workspace: app_uninstalled, or tokens_revoked
    naming bot tokens (user tokens revoked alone leave the bot working)."""
    tokens = event.get("tokens") if isinstance(event.get("tokens"), dict) else {}
    return event.get("type") == "app_uninstalled" or (event.get("type") == "tokens_revoked" and bool(tokens.get("bot")))


def _id_of(value: Any) -> str | None:
    """The `id` of a Slack object ({id, ...}) in an interaction payload."""
    return value.get("id")[:64] if isinstance(value, dict) and isinstance(value.get("id"), str) else None


BOT = web.AppKey("chat_bot", ChatBot)
