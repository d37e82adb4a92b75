"""A real local HTTP server speaking the LLM providers' wire formats, for the model gateway's tests
and benchmarks (and any sandbox test that plays a provider):

* OpenAI Chat Completions `POST /v1/chat/completions`: plain, and `stream: true` as SSE chunks
  (`chat.completion.chunk`, tool calls as `tool_calls` deltas: the id and name first, then the
  arguments in pieces), a final usage chunk when `stream_options.include_usage`, then `[DONE]`;
* OpenAI Responses `POST /v1/responses`: plain, and streamed as the typed event sequence
  (`response.created` ... `response.output_text.delta` ... `response.function_call_arguments.delta`
  ... `response.completed` with the whole response and its usage);
* Anthropic Messages `POST /v1/messages`: plain (`tool_use` content blocks), and streamed as
  `message_start`, `content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`)
  / `content_block_stop`, `message_delta` (stop reason, usage), `message_stop`;
* `GET /v1/models` (a list), anything else a 404 in OpenAI's error shape.

Every request is kept in `requests` (`method`, `path`, `query`, `headers`, `body` parsed, `raw`).

    with ProviderServer() as llm:      # ProviderServer(host="0.0.0.0") for containers, ssl_context= for https
        llm.script(Turn(text="hi", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
        llm.respond = lambda request: Turn(...)      # once the script is used up
        OpenAI(base_url=llm.openai_url), Anthropic(base_url=llm.anthropic_url)

A `Turn` is one answer, rendered in the wire format of the endpoint it is asked on: text, tool
calls, the usage to report, a status (>= 400: that provider's error shape), a delay before the
answer and a gap between stream events; `echo_headers` appends the values of those request headers
to the text (to see whether a credential reaches the provider and comes back)."""
from __future__ import annotations

import asyncio
import itertools
import json
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from tests.support.threaded_server import ThreadedServer


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = "call_1"


@dataclass
class Turn:
    text: str = "ok"
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 10  # every prompt token, cached ones included
    output_tokens: int = 5
    cached_tokens: int = 0
    model: str | None = None  # default: the request's model
    status: int = 200
    error: str = "scripted error"
    delay_s: float = 0.0
    gap_s: float = 0.0  # between stream events
    usage: bool = True  # False: a chat stream has no usage chunk even when include_usage asks for it
    echo_headers: tuple[str, ...] = ()
    pieces: int = 3  # how many deltas the text and each tool call's arguments are split into


def split(text: str, n: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i:i + size] for i in range(0, len(text), size)]


def sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


class ProviderServer(ThreadedServer):
    thread_name = "provider-server"

    def __init__(self, host: str = "127.0.0.1", ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__()
        self.host = host
        self.ssl_context = ssl_context
        self.requests: list[dict[str, Any]] = []
        self.respond: Callable[[dict[str, Any]], Turn] = lambda request: Turn()
        self._script: deque[Turn] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def script(self, *turns: Turn) -> None:
        """Answers to give, in order, before falling back to `respond`."""
        with self._lock:
            self._script.extend(turns)

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 ** 2)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, backlog=1024, ssl_context=self.ssl_context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        scheme = "https" if self.ssl_context else "http"
        self.url = f"{scheme}://{'127.0.0.1' if self.host in ('0.0.0.0', '') else self.host}:{port}"
        self.port = port

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._other)

    # -- plumbing --

    async def _take(self, request: web.Request, answer: bool = True) -> tuple[dict[str, Any], Turn]:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        seen = {"method": request.method, "path": request.path, "query": request.query_string,
                "headers": dict(request.headers), "body": body, "raw": raw}
        with self._lock:
            self.requests.append(seen)
            turn = self._script.popleft() if self._script and answer else None
        turn = turn or (self.respond(seen) if answer else Turn())
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        return seen, turn

    def _text(self, seen: dict[str, Any], turn: Turn) -> str:
        echoed = [f"{name}={seen['headers'].get(name, '')}" for name in turn.echo_headers]
        return " ".join([turn.text, *echoed]) if echoed else turn.text

    @staticmethod
    def _model(seen: dict[str, Any], turn: Turn) -> str:
        body = seen["body"] if isinstance(seen["body"], dict) else {}
        return turn.model or str(body.get("model") or "unknown-model")

    async def _stream(self, request: web.Request, events: list[bytes], gap_s: float) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        for i, event in enumerate(events):
            if i and gap_s:
                await asyncio.sleep(gap_s)
            await resp.write(event)
        await resp.write_eof()
        return resp

    # -- OpenAI Chat Completions --

    def _chat_usage(self, turn: Turn) -> dict[str, Any]:
        return {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
                "prompt_tokens_details": {"cached_tokens": turn.cached_tokens, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        seen, turn = await self._take(request)
        if turn.status >= 400:
            return web.json_response({"error": {"message": turn.error, "type": "server_error", "param": None,
                                                "code": None}}, status=turn.status)
        body = seen["body"] or {}
        model, text, created = self._model(seen, turn), self._text(seen, turn), int(time.time())
        cid = f"chatcmpl-{next(self._ids)}"
        finish = "tool_calls" if turn.tool_calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
            if turn.tool_calls:
                message["tool_calls"] = [{"id": tc.id, "type": "function", "function": {
                    "name": tc.name, "arguments": json.dumps(tc.arguments)}} for tc in turn.tool_calls]
            return web.json_response({
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": self._chat_usage(turn), "system_fingerprint": "fp_test"})
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and turn.usage

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            data: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                    "system_fingerprint": "fp_test", "choices": [
                                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
            if include_usage:
                data["usage"] = None
            return sse(data)

        events = [chunk({"role": "assistant", "content": "", "refusal": None})]
        events += [chunk({"content": piece}) for piece in split(text, turn.pieces)]
        for i, tc in enumerate(turn.tool_calls):
            events.append(chunk({"tool_calls": [{"index": i, "id": tc.id, "type": "function",
                                                 "function": {"name": tc.name, "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                       for piece in split(json.dumps(tc.arguments), turn.pieces)]
        events.append(chunk({}, finish))
        if include_usage:
            events.append(sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                               "system_fingerprint": "fp_test", "choices": [], "usage": self._chat_usage(turn)}))
        events.append(sse("[DONE]"))
        return await self._stream(request, events, turn.gap_s)

    # -- OpenAI Responses --

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        seen, turn = await self._take(request)
        if turn.status >= 400:
            return web.json_response({"error": {"message": turn.error, "type": "server_error", "param": None,
                                                "code": None}}, status=turn.status)
        body = seen["body"] or {}
        model, text = self._model(seen, turn), self._text(seen, turn)
        rid, mid = f"resp_{next(self._ids)}", f"msg_{next(self._ids)}"
        message = {"type": "message", "id": mid, "status": "completed", "role": "assistant",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}
        calls = [{"type": "function_call", "id": f"fc_{tc.id}", "call_id": tc.id, "name": tc.name,
                  "arguments": json.dumps(tc.arguments), "status": "completed"} for tc in turn.tool_calls]
        output = ([message] if text else []) + calls
        usage = {"input_tokens": turn.input_tokens, "input_tokens_details": {"cached_tokens": turn.cached_tokens},
                 "output_tokens": turn.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": turn.input_tokens + turn.output_tokens}

        def response(status: str, out: list, with_usage: bool) -> dict[str, Any]:
            return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
                    "model": model, "output": out, "usage": usage if with_usage else None,
                    "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"),
                    "tools": body.get("tools") or [], "error": None, "incomplete_details": None,
                    "instructions": body.get("instructions"), "metadata": {}, "temperature": 1.0, "top_p": 1.0,
                    "text": {"format": {"type": "text"}}, "truncation": "disabled", "previous_response_id": None,
                    "reasoning": {"effort": None, "summary": None}, "store": True, "user": None}

        if not body.get("stream"):
            return web.json_response(response("completed", output, True))
        seq = itertools.count()
        events: list[bytes] = []

        def event(kind: str, **data: Any) -> None:
            events.append(sse({"type": kind, "sequence_number": next(seq), **data}, event=kind))

        event("response.created", response=response("in_progress", [], False))
        event("response.in_progress", response=response("in_progress", [], False))
        index = 0
        if text:
            event("response.output_item.added", output_index=index,
                  item={**message, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            event("response.content_part.added", item_id=mid, output_index=index, content_index=0, part=part)
            for piece in split(text, turn.pieces):
                event("response.output_text.delta", item_id=mid, output_index=index, content_index=0, delta=piece,
                      logprobs=[])
            event("response.output_text.done", item_id=mid, output_index=index, content_index=0, text=text, logprobs=[])
            event("response.content_part.done", item_id=mid, output_index=index, content_index=0,
                  part={**part, "text": text})
            event("response.output_item.done", output_index=index, item=message)
            index += 1
        for call in calls:
            event("response.output_item.added", output_index=index,
                  item={**call, "arguments": "", "status": "in_progress"})
            for piece in split(call["arguments"], turn.pieces):
                event("response.function_call_arguments.delta", item_id=call["id"], output_index=index, delta=piece)
            event("response.function_call_arguments.done", item_id=call["id"], output_index=index,
                  arguments=call["arguments"])
            event("response.output_item.done", output_index=index, item=call)
            index += 1
        event("response.completed", response=response("completed", output, True))
        return await self._stream(request, events, turn.gap_s)

    # -- Anthropic Messages --

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        seen, turn = await self._take(request)
        if turn.status >= 400:
            return web.json_response({"type": "error", "error": {"type": "api_error", "message": turn.error}},
                                     status=turn.status)
        body = seen["body"] or {}
        model, text = self._model(seen, turn), self._text(seen, turn)
        mid = f"msg_{next(self._ids)}"
        uncached = turn.input_tokens - turn.cached_tokens
        usage = {"input_tokens": uncached, "output_tokens": turn.output_tokens, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": turn.cached_tokens}
        stop = "tool_use" if turn.tool_calls else "end_turn"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": tc.id, "name": tc.name, "input": tc.arguments} for tc in turn.tool_calls]
        if not body.get("stream"):
            return web.json_response({"id": mid, "type": "message", "role": "assistant", "model": model,
                                      "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage})
        events: list[bytes] = []

        def event(kind: str, **data: Any) -> None:
            events.append(sse({"type": kind, **data}, event=kind))

        event("message_start", message={"id": mid, "type": "message", "role": "assistant", "model": model,
                                        "content": [], "stop_reason": None, "stop_sequence": None,
                                        "usage": {**usage, "output_tokens": 1}})
        index = 0
        if text:
            event("content_block_start", index=index, content_block={"type": "text", "text": ""})
            event("ping")
            for piece in split(text, turn.pieces):
                event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
            event("content_block_stop", index=index)
            index += 1
        for tc in turn.tool_calls:
            event("content_block_start", index=index,
                  content_block={"type": "tool_use", "id": tc.id, "name": tc.name, "input": {}})
            for piece in split(json.dumps(tc.arguments), turn.pieces):
                event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
            event("content_block_stop", index=index)
            index += 1
        event("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
              usage={"output_tokens": turn.output_tokens})
        event("message_stop")
        return await self._stream(request, events, turn.gap_s)

    # -- the rest --

    async def _models(self, request: web.Request) -> web.Response:
        await self._take(request, answer=False)
        return web.json_response({"object": "list", "data": [
            {"id": "gpt-4o-mini", "object": "model", "created": 0, "owned_by": "system"}]})

    async def _other(self, request: web.Request) -> web.Response:
        await self._take(request, answer=False)
        return web.json_response({"error": {"message": f"no route {request.method} {request.path}",
                                            "type": "invalid_request_error", "param": None, "code": None}}, status=404)
