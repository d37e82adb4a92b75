"""One OpenAI-compatible chat-completions call (SERVICE_LLM_*, falling back to SERVICE_JUDGE_*).

Failures are `ModelError`s with a code (rate_limited, timeout, network, server_error, unparsable,
not_configured) and a message that never carries the API key.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

DEFAULT_MODEL = "gpt-4o-mini"
TIMEOUT_S = 60


class ModelError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass
class Model:
    base_url: str
    api_key: str = field(default="", repr=False)
    name: str = DEFAULT_MODEL
    timeout_s: float = TIMEOUT_S


def from_settings(settings: Any) -> Model | None:
    """The configured model, or None when no base URL is set."""
    if not settings.llm_base_url:
        return None
    return Model(settings.llm_base_url.rstrip("/"), settings.llm_api_key, settings.llm_model or DEFAULT_MODEL)


async def complete(model: Model, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   max_tokens: int = 1024) -> tuple[dict[str, Any], int]:
    """(the assistant message, total tokens used) of one completion."""
    body: dict[str, Any] = {"model": model.name, "messages": messages, "max_tokens": max_tokens}
    if tools:
        body["tools"] = tools
    headers = {"Authorization": f"Bearer {model.api_key}"} if model.api_key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=model.timeout_s)) as session:
            async with session.post(model.base_url + "/chat/completions", json=body, headers=headers) as response:
                raw = await response.read()
                status = response.status
    except asyncio.TimeoutError:
        raise ModelError("timeout", f"the model did not answer within {model.timeout_s:g}s") from None
    except aiohttp.ClientError as exc:
        raise ModelError("network", f"cannot reach the model ({type(exc).__name__})") from None
    if status == 429:
        raise ModelError("rate_limited", "the model is rate limited (HTTP 429)")
    if status >= 500:
        raise ModelError("server_error", f"the model answered HTTP {status}")
    if status >= 400:
        raise ModelError("server_error", f"the model refused the request (HTTP {status})")
    try:
        data = json.loads(raw)
        message = data["choices"][0]["message"]
        if not isinstance(message, dict):
            raise TypeError
        usage = data.get("usage") or {}
        tokens = int(usage.get("total_tokens") or 0) if isinstance(usage, dict) else 0
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError("unparsable", "the model's answer is not a chat completion") from None
    return message, tokens
