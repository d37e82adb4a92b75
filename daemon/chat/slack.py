"""Calls to the Slack Web API at SERVICE_CHAT_API_BASE through slack_sdk's AsyncWebClient.

Every failure becomes a `SlackError` whose message names the method and Slack's error code only:
tokens and client secrets travel in headers and never appear in a message or a log.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

# slack_sdk logs request headers (the bot token) at DEBUG: keep its loggers above that.
_sdk_log = logging.getLogger("slack_sdk")
_sdk_log.setLevel(logging.WARNING)

TIMEOUT_S = 10
MAX_RETRY_WAIT_S = 30  # a longer Retry-After is not waited for: the call fails as rate limited
# Slack error codes worth retrying (the rest say the request itself is wrong: channel, token, scope).
RETRYABLE_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


class SlackError(Exception):
    def __init__(self, method: str, error: str, retryable: bool, status: int | None = None):
        super().__init__(f"Slack {method} failed: {error}" + (f" (HTTP {status})" if status else ""))
        self.method, self.error, self.retryable, self.status = method, error, retryable, status


def client(api_base: str, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=api_base.rstrip("/") + "/", timeout=TIMEOUT_S, logger=_sdk_log)


def _retry_after(headers: Any) -> float:
    """Slack's Retry-After (seconds) of a 429, bounded by MAX_RETRY_WAIT_S."""
    try:
        return min(max(float(headers.get("Retry-After", 1)), 0.0), MAX_RETRY_WAIT_S)
    except (TypeError, ValueError, AttributeError):
        return 1.0


async def call(api_base: str, token: str | None, method: str, *, rate_limit_retries: int = 0, **params: Any) -> dict[str, Any]:
    """`method` (a slack_sdk method name such as chat_postMessage) with `params`; Slack's answer.
    A 429 is tried again after Slack's Retry-After up to `rate_limit_retries` times."""
    api_name = method.replace("_", ".")  # chat_postMessage -> chat.postMessage
    for attempt in range(rate_limit_retries + 1):
        try:
            response = await getattr(client(api_base, token), method)(**params)
            return dict(response.data) if isinstance(response.data, dict) else {}
        except SlackApiError as exc:
            status = exc.response.status_code
            if status == 429 and attempt < rate_limit_retries:
                await asyncio.sleep(_retry_after(exc.response.headers))
                continue
            data = exc.response.data if isinstance(exc.response.data, dict) else {}
            error = str(data.get("error") or "unexpected answer")[:100]
            raise SlackError(api_name, error, status == 429 or status >= 500 or error in RETRYABLE_ERRORS, status) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise SlackError(api_name, f"network error ({type(exc).__name__})", True) from None
    raise AssertionError("unreachable: the last attempt returns or raises")
