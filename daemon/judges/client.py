"""The one place that calls an OpenAI-compatible chat-completions endpoint to judge.

Structured output (`response_format` json_schema: `{score, reason}` or `{label, reason}` with the
labels as an enum), tolerant reading (the keys needed, of the right types; extra keys are ignored),
and retries: 3 attempts with exponential backoff and jitter on
429 (honouring `Retry-After`, capped), 5xx, timeouts and network errors; an unparsable reply gets
one follow-up asking for the JSON only. What still fails raises `JudgeFailure(code, message)`:
a failed judge call is never a score. The API key is never put in a message."""
from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import re
import weakref
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from yarl import URL

log = logging.getLogger("svcd.judges")

MAX_RETRY_AFTER_S = 10.0
BODY_EXCERPT = 200
REFORMAT_PROMPT = "Your reply could not be read ({why}). Reply again with only the JSON object, nothing else."
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str | None
    api_key: str | None
    model: str | None
    timeout_s: float = 60.0
    attempts: int = 3
    backoff_s: float = 0.5  # first backoff; doubles per attempt, times a jitter in [0.5, 1.5)

    @classmethod
    def from_env(cls, api_key_fallback: str | None = None) -> "JudgeConfig":
        """SERVICE_JUDGE_BASE_URL, SERVICE_JUDGE_API_KEY (else `api_key_fallback`, the tenant's
        dashboard secret), SERVICE_JUDGE_MODEL, SERVICE_JUDGE_TIMEOUT_S, SERVICE_JUDGE_BACKOFF_S."""
        return cls(
            base_url=os.environ.get("SERVICE_JUDGE_BASE_URL") or None,
            api_key=os.environ.get("SERVICE_JUDGE_API_KEY") or api_key_fallback,
            model=os.environ.get("SERVICE_JUDGE_MODEL") or None,
            timeout_s=_env_float("SERVICE_JUDGE_TIMEOUT_S", 60.0, positive=True),
            backoff_s=_env_float("SERVICE_JUDGE_BACKOFF_S", 0.5),
        )


def _env_float(name: str, default: float, positive: bool = False) -> float:
    """The setting, or `default` when it is unset, not a number, negative (or 0 when `positive`)."""
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if math.isfinite(value) and (value > 0 if positive else value >= 0) else default


class JudgeFailure(Exception):
    """A judge call that failed after its retries; `code` is one of contract.judges.JUDGE_ERROR_CODES."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class Unparsable(ValueError):
    """The model's reply is not the JSON object asked for."""


@dataclass(frozen=True)
class JudgeReply:
    score: float
    reason: str
    label: str | None = None


def system_prompt(kind: Literal["score", "classifier"], choices: dict[str, float] | None = None) -> str:
    if kind == "classifier":
        labels = ", ".join(json.dumps(label) for label in (choices or {}))
        shape = f'{{"label": <one of {labels}>, "reason": "<one or two sentences>"}}'
    else:
        shape = '{"score": <number from 0 to 1>, "reason": "<one or two sentences>"}'
    return ("You are a strict, impartial grader. Judge only against the rubric. "
            f"Reply with a single JSON object and nothing else: {shape}.")


def response_format(kind: Literal["score", "classifier"], choices: dict[str, float] | None = None) -> dict[str, Any]:
    """OpenAI structured output: the reply must match this schema."""
    if kind == "classifier":
        first = {"label": {"type": "string", "enum": list(choices or {})}}
    else:
        first = {"score": {"type": "number", "description": "from 0 (worst) to 1 (best)"}}
    schema = {"type": "object", "properties": {**first, "reason": {"type": "string"}},
              "required": [*first, "reason"], "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": schema}}


def parse_reply(content: str | None, kind: Literal["score", "classifier"] = "score",
                choices: dict[str, float] | None = None) -> JudgeReply:
    """The verdict in the reply's JSON object (a markdown code fence around it is tolerated): the
    keys `response_format` asks for, of the right types, are read and any other key is ignored
    (models add `passed`, `confidence`, ...); Unparsable when one is missing or mistyped."""
    if not isinstance(content, str) or not content.strip():
        raise Unparsable("the reply is empty")
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise Unparsable(f"not JSON: {content[:BODY_EXCERPT]!r}") from None
    key = "label" if kind == "classifier" else "score"
    if not isinstance(data, dict) or not {key, "reason"} <= set(data):
        raise Unparsable(f"expected a JSON object with the keys {key!r} and 'reason': {content[:BODY_EXCERPT]!r}")
    if not isinstance(data["reason"], str):
        raise Unparsable("'reason' is not a string")
    reason = data["reason"][:1000]
    if kind == "classifier":
        label = data["label"]
        if not isinstance(label, str) or label not in (choices or {}):
            raise Unparsable(f"label {str(label)[:100]!r} is not one of the choices")
        return JudgeReply(score=float((choices or {})[label]), reason=reason, label=label)
    score = data["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise Unparsable(f"score {str(score)[:40]!r} is not a number from 0 to 1")
    return JudgeReply(score=float(score), reason=reason)


async def judge(config: JudgeConfig, model: str, messages: list[dict[str, str]],
                kind: Literal["score", "classifier"] = "score", choices: dict[str, float] | None = None) -> JudgeReply:
    """One verdict; JudgeFailure when the call still fails after its retries."""
    try:
        return await _judge(config, model, messages, kind, choices)
    except JudgeFailure as exc:
        log.warning("judge call failed (%s): %s", exc.code, exc.message, extra={"judge_model": model})
        raise


async def _judge(config: JudgeConfig, model: str, messages: list[dict[str, str]],
                 kind: Literal["score", "classifier"], choices: dict[str, float] | None) -> JudgeReply:
    if not config.base_url:
        raise JudgeFailure("not_configured", "no judge is configured: set SERVICE_JUDGE_BASE_URL (and "
                           "SERVICE_JUDGE_API_KEY, SERVICE_JUDGE_MODEL) for the daemon")
    payload = {"model": model, "messages": messages, "temperature": 0, "response_format": response_format(kind, choices)}
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    url = config.base_url.rstrip("/") + "/chat/completions"
    session = _session()
    content = await _complete(session, url, headers, payload, config)
    try:
        return parse_reply(content, kind, choices)
    except Unparsable as exc:
        follow_up = [*messages, {"role": "assistant", "content": content or ""},
                     {"role": "user", "content": REFORMAT_PROMPT.format(why=exc)}]
        content = await _complete(session, url, headers, {**payload, "messages": follow_up}, config)
        try:
            return parse_reply(content, kind, choices)
        except Unparsable as again:
            raise JudgeFailure("unparsable", _clean(f"the judge's reply is unparsable after a reformat request: {again}", config)) from None


# One pooled session per event loop: a new connection per judgement costs about a quarter of the
# throughput (tests/bench/bench_judges.py).
_sessions: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]" = weakref.WeakKeyDictionary()


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        session = _sessions[loop] = aiohttp.ClientSession()
    return session


async def close_session() -> None:
    """Close this event loop's pooled session (the daemon does at shutdown)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


async def _complete(session: aiohttp.ClientSession, url: str, headers: dict[str, str], payload: dict[str, Any],
                    config: JudgeConfig) -> str | None:
    """The first choice's content, retrying what is worth retrying."""
    for attempt in range(1, config.attempts + 1):
        retry_after: float | None = None
        try:
            async with session.post(url, json=payload, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=config.timeout_s)) as response:
                text = await response.text(errors="replace")
                if response.status == 429:
                    failure = JudgeFailure("rate_limited", f"the judge answered 429: {text[:BODY_EXCERPT]}")
                    retry_after = _retry_after(response.headers.get("Retry-After"))
                elif response.status >= 500:
                    failure = JudgeFailure("server_error", f"the judge answered {response.status}: {text[:BODY_EXCERPT]}")
                elif response.status >= 400:
                    raise JudgeFailure("rejected", _clean(f"the judge refused the request with {response.status}: {text[:BODY_EXCERPT]}", config))
                else:
                    return _content(text, config)
        except asyncio.TimeoutError:
            failure = JudgeFailure("timeout", f"the judge did not answer within {config.timeout_s:g}s")
        except aiohttp.ClientError as exc:
            failure = JudgeFailure("network", f"cannot reach the judge at {_where(config)}: {type(exc).__name__}")
        if attempt == config.attempts:
            failure.message = _clean(f"{failure.message} (after {attempt} attempts)", config)
            failure.args = (failure.message,)
            raise failure
        wait = retry_after if retry_after is not None else config.backoff_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")


def _content(text: str, config: JudgeConfig) -> str | None:
    """The assistant content of a chat completion; refusals and malformed envelopes are failures."""
    try:
        choice = json.loads(text)["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise JudgeFailure("unparsable", _clean(f"not a chat completion: {text[:BODY_EXCERPT]!r}", config)) from None
    if not isinstance(message, dict):
        raise JudgeFailure("unparsable", "not a chat completion: the message is not an object")
    if message.get("refusal"):
        raise JudgeFailure("refusal", _clean(f"the judge refused: {str(message['refusal'])[:BODY_EXCERPT]}", config))
    if choice.get("finish_reason") == "content_filter":
        raise JudgeFailure("refusal", "the judge's reply was withheld by its content filter")
    content = message.get("content")
    return content if isinstance(content, str) else None


def _retry_after(header: str | None) -> float | None:
    """Seconds from a Retry-After header (capped); None when absent or a date."""
    try:
        value = float(header) if header is not None else None
    except ValueError:
        return None
    if value is None or not math.isfinite(value):
        return None
    return min(MAX_RETRY_AFTER_S, max(0.0, value))


def _where(config: JudgeConfig) -> str:
    try:
        return str(URL(config.base_url or "").with_user(None))  # never a password in the URL
    except (ValueError, TypeError):
        return "the configured address"


def _clean(message: str, config: JudgeConfig) -> str:
    """An upstream may echo the key back: it never leaves this module."""
    if config.api_key and len(config.api_key) >= 4:
        message = message.replace(config.api_key, "[redacted]")
    return message
