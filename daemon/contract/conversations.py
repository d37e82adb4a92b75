"""Conversations with the investigation agent (also what the chat bot's threads are)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from daemon.contract.common import Request, Response

MAX_METADATA_KEYS = 20
MAX_METADATA_VALUE_CHARS = 500
MAX_MESSAGE_CHARS = 4000


class ConversationCreate(Request):
    title: str | None = Field(default=None, max_length=200)
    metadata: dict[str, str | int | float | bool | None] | None = Field(
        default=None, max_length=MAX_METADATA_KEYS,
        description=f"at most {MAX_METADATA_KEYS} keys of at most 64 characters; string values of at most "
                    f"{MAX_METADATA_VALUE_CHARS} characters; `chat_key` is set by the chat integration only")

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key, item in (value or {}).items():
            if not key or len(key) > 64:
                raise ValueError("metadata keys are 1 to 64 characters")
            if key == "chat_key":
                raise ValueError("metadata.chat_key is set by the chat integration (a Slack thread), not by clients")
            if isinstance(item, str) and len(item) > MAX_METADATA_VALUE_CHARS:
                raise ValueError(f"metadata.{key}: at most {MAX_METADATA_VALUE_CHARS} characters")
        return value


class MessageCreate(Request):
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="the question")

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        return value


class ToolCallRecord(Response):
    name: str
    arguments: str = Field(description="the JSON arguments the model passed")


class Message(Response):
    id: str
    role: Literal["user", "assistant"]
    content: str
    tool_calls: list[ToolCallRecord] = Field(description="the read-only tools the agent called for this answer")
    error: str | None = Field(description="the model failure code when the answer reports one (the content says so)")
    created_at: str


class Conversation(Response):
    id: str
    title: str | None
    metadata: dict[str, Any] = Field(description="`chat_key` = '<team>:<channel>:<thread_ts>' for a Slack thread")
    message_count: int
    created_at: str
    updated_at: str
    messages: list[Message] | None = Field(default=None, description="the last 200 messages, oldest first (single get only)")


class MessageReply(Response):
    conversation_id: str
    question: Message
    answer: Message
