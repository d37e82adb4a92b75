"""Conversations with the investigation agent: create, list, read, ask."""
from __future__ import annotations

from aiohttp import web

from daemon.app import owned_by_path
from daemon.contract.common import Page
from daemon.contract.conversations import Conversation, ConversationCreate, MessageCreate
from daemon.errors import Conflict
from daemon.contract import routes as R
from daemon.http import STORE, Routes, page_body, page_params
from daemon.investigate import conversations as investigate
from daemon.store import conversations as store

routes = Routes("conversations")
HISTORY_SHOWN = 200


async def _view(request: web.Request, row: dict, with_messages: bool = False) -> dict:
    db = request.app[STORE]
    body = {key: row[key] for key in ("id", "title", "metadata", "created_at", "updated_at")}
    body["message_count"] = row["message_count"] if "message_count" in row else await store.message_count(db, row["id"])
    if with_messages:
        body["messages"] = [{key: m[key] for key in ("id", "role", "content", "tool_calls", "error", "created_at")}
                            for m in await store.messages(db, row["id"], HISTORY_SHOWN)]
    return body


async def _owned(request: web.Request) -> dict:
    return await owned_by_path(request, "conversation_id", store.get, "conversation")


@routes.post(R.CREATE_CONVERSATION, "Start a conversation with the investigation agent", typed=True)
async def create_conversation(request: web.Request) -> dict:
    body: ConversationCreate = request["body"]
    row = await store.create(request.app[STORE], request["tenant_id"], body.title, dict(body.metadata or {}))
    return await _view(request, row)


@routes.get(R.LIST_CONVERSATIONS, "Conversations, newest first (Slack threads carry metadata.chat_key)")
async def list_conversations(request: web.Request) -> Page[Conversation]:
    limit, before = page_params(request)
    rows = await store.page(request.app[STORE], request["tenant_id"], limit, before)
    items = [await _view(request, row) for row in rows[:limit]]
    return page_body(items, rows[:limit][-1]["seq"] if rows[:limit] else None, limit, len(rows))


@routes.get(R.GET_CONVERSATION, "A conversation with its messages", typed=True)
async def get_conversation(request: web.Request) -> dict:
    return await _view(request, await _owned(request), with_messages=True)


@routes.post(R.POST_MESSAGE, "Ask the investigation agent; answers with its reply", errors=(409,), typed=True, description=(
                 "Runs the agent (an OpenAI-compatible tool-calling loop over read-only views of this tenant's experiments, runs, "
                 "invariant evidence, traces, scores, comparisons and reproducers) with the conversation's history. A model "
                 "failure is answered as such (`answer.error` set, the content says the model failed). 409 `conflict` with "
                 "`state: not_configured` when the daemon has no model (SERVICE_LLM_BASE_URL)."))
async def ask(request: web.Request) -> dict:
    row = await _owned(request)
    body: MessageCreate = request["body"]
    try:
        asked, answered = await investigate.install(request.app).ask(request["tenant_id"], row["id"], body.content)
    except investigate.NotConfigured as exc:
        raise Conflict(str(exc), state="not_configured")
    keys = ("id", "role", "content", "tool_calls", "error", "created_at")
    return {"conversation_id": row["id"], "question": {k: asked[k] for k in keys}, "answer": {k: answered[k] for k in keys}}


def setup(app: web.Application) -> None:
    investigate.install(app)
