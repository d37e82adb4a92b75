"""The investigation agent's conversations and their messages (migration 012)."""
from __future__ import annotations

import json
from typing import Any

from daemon.store.db import Store
from daemon.util import new_id, now_iso


def _conversation(row: Any) -> dict[str, Any]:
    data = dict(row)
    data["metadata"] = json.loads(data["metadata"] or "{}")
    return data


def _message(row: Any) -> dict[str, Any]:
    data = dict(row)
    data["tool_calls"] = json.loads(data["tool_calls"]) if data["tool_calls"] else []
    return data


async def create(store: Store, tenant_id: str, title: str | None, metadata: dict[str, Any]) -> dict[str, Any]:
    """A new conversation; metadata.chat_key (a Slack thread) is also kept in its own column."""
    conversation_id, now = new_id("conv_"), now_iso()
    chat_key = metadata.get("chat_key") if isinstance(metadata.get("chat_key"), str) else None
    await store.execute(
        "INSERT INTO conversations (id, tenant_id, title, metadata, chat_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, tenant_id, title, json.dumps(metadata), chat_key, now, now),
    )
    return await get(store, conversation_id)  # type: ignore[return-value]


async def get(store: Store, conversation_id: str) -> dict[str, Any] | None:
    row = await store.fetchone("SELECT * FROM conversations WHERE id = ?", (conversation_id,))
    return _conversation(row) if row is not None else None


async def by_chat_key(store: Store, tenant_id: str, chat_key: str) -> dict[str, Any] | None:
    row = await store.fetchone("SELECT * FROM conversations WHERE tenant_id = ? AND chat_key = ?", (tenant_id, chat_key))
    return _conversation(row) if row is not None else None


async def page(store: Store, tenant_id: str, limit: int, before_seq: int | None) -> list[dict[str, Any]]:
    """Newest first, `limit` + 1 rows with their message_count (the caller tells whether there is a next page)."""
    sql, params = ("SELECT c.*, (SELECT COUNT(*) FROM conversation_messages m WHERE m.conversation_id = c.id) AS message_count"
                   " FROM conversations c WHERE c.tenant_id = ?"), [tenant_id]
    if before_seq is not None:
        sql, params = sql + " AND c.seq < ?", [*params, before_seq]
    rows = await store.fetchall(sql + " ORDER BY c.seq DESC LIMIT ?", [*params, limit + 1])
    return [_conversation(r) for r in rows]


async def add_message(store: Store, conversation_id: str, tenant_id: str, role: str, content: str,
                      tool_calls: list[dict[str, Any]] | None = None, error: str | None = None) -> dict[str, Any]:
    message_id, now = new_id("msg_"), now_iso()
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO conversation_messages (id, conversation_id, tenant_id, role, content, tool_calls, error, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (message_id, conversation_id, tenant_id, role, content, json.dumps(tool_calls) if tool_calls else None, error, now),
        )
        await tx.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
        row = await tx.fetchone("SELECT * FROM conversation_messages WHERE id = ?", (message_id,))
    return _message(row)


async def messages(store: Store, conversation_id: str, limit: int) -> list[dict[str, Any]]:
    """The last `limit` messages, oldest first."""
    rows = await store.fetchall(
        "SELECT * FROM (SELECT * FROM conversation_messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
        (conversation_id, limit),
    )
    return [_message(r) for r in rows]


async def message_count(store: Store, conversation_id: str) -> int:
    row = await store.fetchone("SELECT COUNT(*) AS n FROM conversation_messages WHERE conversation_id = ?", (conversation_id,))
    return int(row["n"]) if row else 0


async def for_chat_key(store: Store, tenant_id: str, chat_key: str, title: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """The thread's conversation, created by the first mention (two mentions at once make one)."""
    now = now_iso()
    await store.execute(
        "INSERT OR IGNORE INTO conversations (id, tenant_id, title, metadata, chat_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (new_id("conv_"), tenant_id, title, json.dumps({**metadata, "chat_key": chat_key}), chat_key, now, now),
    )
    return await by_chat_key(store, tenant_id, chat_key)  # type: ignore[return-value]
