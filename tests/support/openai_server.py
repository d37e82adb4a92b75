"""A real local HTTP server speaking the OpenAI chat-completions wire format, for every test that
plays a model: judges, score rules, the investigation agent.

It runs on its own thread and event loop (tests/support/threaded_server.py), so blocking tests
(a CLI in a subprocess) and async tests (an in-process daemon) use it the same way:

    with OpenAIServer() as llm:
        llm.script(Reply(content='{"score": 0.9, "reason": "ok"}'), Reply(status=429, headers={"Retry-After": "0"}))
        llm.respond = lambda body: Reply(content=...)   # once the script is used up
        ... SERVICE_JUDGE_BASE_URL = llm.url (ends in /v1) ...
        llm.requests  # every request: {"body", "headers"}

A `Reply` is a status, headers, an optional delay and either the assistant `content`, the
assistant `tool_calls` (OpenAI's shape: [{"id", "type": "function", "function": {"name",
"arguments": "<json string>"}}]) or a `raw` body sent as is (bytes or str)."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from tests.support.threaded_server import ThreadedServer


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw: bytes | str | None = None
    finish_reason: str | None = None

    def body(self, model: str) -> bytes:
        if self.raw is not None:
            return self.raw.encode() if isinstance(self.raw, str) else self.raw
        if self.status >= 400:
            return json.dumps({"error": {"message": f"scripted {self.status}", "type": "server_error"}}).encode()
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        return json.dumps({
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }).encode()


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class OpenAIServer(ThreadedServer):
    base_path = "/v1"
    thread_name = "openai-server"

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.respond: Callable[[dict[str, Any]], Reply] = lambda body: Reply(content='{"score": 1, "reason": "default"}')
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()

    def script(self, *replies: Reply) -> None:
        """Replies to give, in order, before falling back to `respond`."""
        with self._lock:
            self._script.extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        return self.respond(body)

    async def _chat(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        with self._lock:
            self.requests.append({"body": body, "headers": dict(request.headers)})
        reply = self._next(body)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        return web.Response(status=reply.status, body=reply.body(str(body.get("model", ""))),
                            headers={"Content-Type": "application/json", **reply.headers})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
