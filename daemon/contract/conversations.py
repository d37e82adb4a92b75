"""Conversations with the investigation agent (also what the chat bot's threads are)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from daemon.contract.common import NOT_BLANK_PATTERN, Request, Response

MAX_METADATA_KEYS = 20
MAX_METADATA_VALUE_CHARS = 500
MAX_MESSAGE_CHARS = 4000


MetadataKey = Annotated[str, Field(min_length=1, max_length=64, json_schema_extra={"not": {"const": "chat_key"}})]


def _not_text(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("a string is not read as a number")
    return value


# A string stays a string (one too long is refused, never read as a number), a number a number.
MetadataValue = (Annotated[str, Field(strict=True, max_length=MAX_METADATA_VALUE_CHARS)]
                 | Annotated[int, BeforeValidator(_not_text), Field(ge=-2**53, le=2**53)] | Annotated[bool, Field(strict=True)] | None)


class ConversationCreate(Request):
    title: str | None = Field(default=None, max_length=200)
    metadata: dict[MetadataKey, MetadataValue] | None = Field(
        default=None, max_length=MAX_METADATA_KEYS,
        description=f"at most {MAX_METADATA_KEYS} keys of 1 to 64 characters; strings of at most {MAX_METADATA_VALUE_CHARS} "
                    "characters; `chat_key` is set by the chat integration only (a Slack thread)")

    @field_validator("metadata")
    @classmethod
    def _no_chat_key(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value and "chat_key" in value:
            raise ValueError("metadata.chat_key is set by the chat integration (a Slack thread), not by clients")
        return value


class MessageCreate(Request):
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="the question (not only whitespace)",
                         json_schema_extra={"pattern": NOT_BLANK_PATTERN})

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
