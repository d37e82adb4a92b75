"""A real local HTTP server speaking the Slack Web API wire format, for the chat tests.

It runs on its own thread and event loop (tests/support/threaded_server.py), so in-process
daemons and CLI subprocesses use it alike:

    with SlackServer() as slack:
        slack.grant("code-1", team_id="T1", team_name="Acme")  # oauth.v2.access answers for that code
        ... SERVICE_CHAT_API_BASE = slack.url (ends in /api) ...
        slack.posted        # every accepted chat.postMessage: {channel, text, thread_ts, blocks, token}
        slack.calls         # every request: {method, params, headers}
        slack.fail("chat.postMessage", status=500)  # the next call of that method fails so

`slack.say(channel, ts, text)` adds a person's message that `conversations.replies` returns.
Methods: `oauth.v2.access` (client id and secret in HTTP Basic auth or the form, a granted code,
used once), `chat.postMessage` and `conversations.replies` and `auth.test` (a bot token handed out
by oauth.v2.access, or one added with `allow_token`). Bodies are form-encoded or JSON, answers are
Slack's `{ok, ...}` / `{ok: false, error}` with HTTP 200, and 429 with `Retry-After` when failing so.
"""
from __future__ import annotations

import base64
import json
import threading
import time
from collections import deque
from typing import Any

from aiohttp import web

from tests.support.threaded_server import ThreadedServer

BOT_USER_ID = "U0SVCBOT"
APP_ID = "A0SVCAPP"


class SlackServer(ThreadedServer):
    base_path = "/api"
    thread_name = "slack-server"

    def __init__(self, client_id: str = "cid-1", client_secret: str = "client-secret-value") -> None:
        super().__init__()
        self.client_id, self.client_secret = client_id, client_secret
        self.calls: list[dict[str, Any]] = []
        self.posted: list[dict[str, Any]] = []
        self.said: list[dict[str, Any]] = []  # people's messages (`say`), read back by conversations.replies
        self.tokens: dict[str, dict[str, str]] = {}  # bot token -> {team_id, team_name}
        self._codes: dict[str, dict[str, str]] = {}
        self._failures: dict[str, deque[dict[str, Any]]] = {}
        self._ts = 1700000000.000100
        self._lock = threading.Lock()

    # --- scripting -------------------------------------------------------------------------------

    def grant(self, code: str, team_id: str = "T0ACME", team_name: str = "Acme", token: str | None = None) -> str:
        """oauth.v2.access accepts `code` once and hands out `token` (returned) for that team."""
        token = token or f"xoxb-{team_id.lower()}-{code}-secret-bot-token"
        with self._lock:
            self._codes[code] = {"team_id": team_id, "team_name": team_name, "token": token}
        return token

    def allow_token(self, token: str, team_id: str = "T0ACME", team_name: str = "Acme") -> None:
        with self._lock:
            self.tokens[token] = {"team_id": team_id, "team_name": team_name}

    def fail(self, method: str, status: int = 200, error: str = "internal_error", retry_after: int = 1) -> None:
        with self._lock:
            self._failures.setdefault(method, deque()).append({"status": status, "error": error, "retry_after": retry_after})

    def say(self, channel: str, ts: str, text: str, user: str = "U0ALICE", thread_ts: str | None = None) -> None:
        """A person's message in a channel (a thread's root when thread_ts is None)."""
        with self._lock:
            self.said.append({"channel": channel, "ts": ts, "text": text, "user": user, "thread_ts": thread_ts or ts})

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """Messages posted in one thread, in order."""
        with self._lock:
            return [m for m in self.posted if m["channel"] == channel and m.get("thread_ts") == thread_ts]

    # --- wire --------------------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.method == "POST":
            if request.content_type == "application/json":
                raw = await request.read()
                params.update(json.loads(raw) if raw else {})
            else:
                params.update(dict(await request.post()))
        return params

    def _bearer(self, request: web.Request, params: dict[str, Any]) -> str:
        header = request.headers.get("Authorization", "")
        return header[7:] if header.startswith("Bearer ") else str(params.get("token") or "")

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        with self._lock:
            self.calls.append({"method": method, "params": params, "headers": dict(request.headers)})
            failure = self._failures.get(method, deque()).popleft() if self._failures.get(method) else None
        if failure is not None:
            if failure["status"] == 429:
                return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                         headers={"Retry-After": str(failure["retry_after"])})
            return web.json_response({"ok": False, "error": failure["error"]}, status=failure["status"])
        handler = {"oauth.v2.access": self._oauth, "chat.postMessage": self._post, "conversations.replies": self._replies,
                   "auth.test": self._auth_test}.get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response(handler(request, params))

    def _oauth(self, request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        client_id, client_secret = params.get("client_id"), params.get("client_secret")
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            client_id, _, client_secret = base64.b64decode(header[6:]).decode().partition(":")
        if (client_id, client_secret) != (self.client_id, self.client_secret):
            return {"ok": False, "error": "invalid_client_id" if client_id != self.client_id else "bad_client_secret"}
        with self._lock:
            grant = self._codes.pop(str(params.get("code")), None)
            if grant is None:
                return {"ok": False, "error": "invalid_code"}
            self.tokens[grant["token"]] = {"team_id": grant["team_id"], "team_name": grant["team_name"]}
        return {"ok": True, "app_id": APP_ID, "authed_user": {"id": "U0INSTALLER"}, "scope": "app_mentions:read,chat:write",
                "token_type": "bot", "access_token": grant["token"], "bot_user_id": BOT_USER_ID,
                "team": {"id": grant["team_id"], "name": grant["team_name"]}, "enterprise": None, "is_enterprise_install": False}

    def _team(self, request: web.Request, params: dict[str, Any]) -> dict[str, str] | None:
        with self._lock:
            return self.tokens.get(self._bearer(request, params))

    def _post(self, request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        team = self._team(request, params)
        if team is None:
            return {"ok": False, "error": "invalid_auth"}
        if not params.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not params.get("text") and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        blocks = params.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        with self._lock:
            self._ts += 1
            ts = f"{self._ts:.6f}"
            message = {"channel": params["channel"], "text": params.get("text"), "thread_ts": params.get("thread_ts"),
                       "blocks": blocks, "ts": ts, "team_id": team["team_id"], "token": self._bearer(request, params)}
            self.posted.append(message)
        return {"ok": True, "channel": params["channel"], "ts": ts,
                "message": {"type": "message", "text": params.get("text"), "user": BOT_USER_ID, "ts": ts}}

    def _replies(self, request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        if self._team(request, params) is None:
            return {"ok": False, "error": "invalid_auth"}
        channel, root = str(params.get("channel")), str(params.get("ts"))
        with self._lock:
            people = [{"type": "message", "user": m["user"], "text": m["text"], "ts": m["ts"], "thread_ts": m["thread_ts"]}
                      for m in self.said if m["channel"] == channel and m["thread_ts"] == root]
        bot = [{"type": "message", "user": BOT_USER_ID, "text": m["text"], "ts": m["ts"], "thread_ts": m["thread_ts"]}
               for m in self.thread(channel, root)]
        return {"ok": True, "has_more": False, "messages": sorted(people + bot, key=lambda m: float(m["ts"]))}

    def _auth_test(self, request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        team = self._team(request, params)
        if team is None:
            return {"ok": False, "error": "invalid_auth"}
        return {"ok": True, "url": "https://acme.slack.com/", "team": team["team_name"], "user": "svc",
                "team_id": team["team_id"], "user_id": BOT_USER_ID, "bot_id": "B0SVCBOT", "is_enterprise_install": False}

    # --- lifecycle ---------------------------------------------------------------------------------

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._handle)


def now_ts() -> str:
    return f"{time.time():.6f}"
