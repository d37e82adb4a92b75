"""Conversations with the investigation agent: a question is stored, answered with the
conversation's history, and the answer stored. One question at a time per conversation."""
from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from daemon.investigate import agent, llm
from daemon.store import conversations as store_conversations
from daemon.appkeys import SETTINGS, STORE

HISTORY_MESSAGES = 20  # earlier turns the model sees
MAX_QUESTION_CHARS = 4000


class NotConfigured(Exception):
    """No model: SERVICE_LLM_BASE_URL (or SERVICE_JUDGE_BASE_URL) is not set."""


class Investigator:
    def __init__(self, app: web.Application):
        self.app = app
        self._locks: dict[str, asyncio.Lock] = {}

    def model(self) -> llm.Model | None:
        return llm.from_settings(self.app[SETTINGS])

    async def ask(self, tenant_id: str, conversation_id: str, question: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the stored question, the stored answer)."""
        model = self.model()
        if model is None:
            raise NotConfigured("the investigation agent has no model: set SERVICE_LLM_BASE_URL (and SERVICE_LLM_API_KEY, SERVICE_LLM_MODEL)")
        store = self.app[STORE]
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        try:
            async with lock:
                earlier = await store_conversations.messages(store, conversation_id, HISTORY_MESSAGES)
                history = [{"role": m["role"], "content": m["content"]} for m in earlier if not m["error"]]
                asked = await store_conversations.add_message(store, conversation_id, tenant_id, "user", question)
                answer = await agent.investigate(store, model, tenant_id, history, question)
                answered = await store_conversations.add_message(store, conversation_id, tenant_id, "assistant", answer.content,
                                                                 answer.tool_calls, answer.error)
        finally:
            if not lock.locked():
                self._locks.pop(conversation_id, None)
        return asked, answered


INVESTIGATOR = web.AppKey("investigator", Investigator)


def install(app: web.Application) -> Investigator:
    """The app's one Investigator (the conversations API and the chat bot share it)."""
    if INVESTIGATOR not in app:
        app[INVESTIGATOR] = Investigator(app)
    return app[INVESTIGATOR]
