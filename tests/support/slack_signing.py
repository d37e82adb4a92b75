"""Requests signed the way Slack signs them: `X-Slack-Signature: v0=<hex HMAC-SHA256 of
"v0:<timestamp>:<raw body>">` and `X-Slack-Request-Timestamp`, and the Events API payloads."""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import Any


def signed_headers(secret: str, body: bytes, timestamp: int | None = None, retry: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}", "Content-Type": "application/json"}
    if retry is not None:
        headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
    return headers


def url_verification(challenge: str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P") -> dict[str, Any]:
    return {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge, "type": "url_verification"}


def app_mention(text: str, *, team: str = "T0ACME", channel: str = "C0INCIDENTS", user: str = "U0ALICE", ts: str | None = None,
                thread_ts: str | None = None, event_id: str | None = None, bot_user: str = "U0SVCBOT") -> dict[str, Any]:
    """An Events API `event_callback` wrapping an `app_mention` (text starts with the bot's mention)."""
    ts = ts or f"{time.time():.6f}"
    event: dict[str, Any] = {"type": "app_mention", "user": user, "text": f"<@{bot_user}> {text}".rstrip(), "ts": ts,
                             "channel": channel, "event_ts": ts, "team": team}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "team_id": team, "api_app_id": "A0SVCAPP", "event": event,
            "type": "event_callback", "event_id": event_id or "Ev" + secrets.token_hex(5).upper(),
            "event_time": int(float(ts)), "authorizations": [{"team_id": team, "user_id": bot_user, "is_bot": True}]}


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def block_actions(message: dict[str, Any], action_id: str, *, team: str = "T0ACME", user: str = "U0ALICE") -> dict[str, Any]:
    """The interactivity payload Slack posts when `user` clicks the button `action_id` of a message the
    bot posted (`message` as the local Slack server recorded it: channel, ts, blocks)."""
    button = next(e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id)
    action = {"type": "button", "action_id": action_id, "block_id": "b1", "text": button["text"], "action_ts": f"{time.time():.6f}"}
    if "value" in button:
        action["value"] = button["value"]
    return {"type": "block_actions", "user": {"id": user, "team_id": team}, "api_app_id": "A0SVCAPP", "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "container": {"type": "message", "message_ts": message["ts"], "channel_id": message["channel"], "is_ephemeral": False},
            "trigger_id": "1.2.3", "team": {"id": team, "domain": "acme"}, "channel": {"id": message["channel"], "name": "evals"},
            "message": {"type": "message", "user": "U0SVCBOT", "ts": message["ts"], "text": message["text"], "blocks": message["blocks"]},
            "response_url": "https://hooks.slack.com/actions/T0ACME/1/xyz", "actions": [action]}


def form_body(payload: dict[str, Any]) -> bytes:
    """An interactivity request body: form-encoded `payload=<json>`, as Slack sends it."""
    from urllib.parse import urlencode

    return urlencode({"payload": json.dumps(payload)}).encode()
