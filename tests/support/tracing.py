"""Fake tracing endpoints: a stdlib collector standing in for the daemon's trace ingest, and a
fake OpenAI + Anthropic API (plain and streaming wire formats) for the SDK wrappers."""
from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiohttp import web


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        collector: Collector = self.server.collector  # type: ignore[attr-defined]
        status = collector.status
        if status == 202:
            data = json.loads(body)
            with collector.lock:
                collector.requests.append({"path": self.path, "headers": dict(self.headers), "events": data["events"]})
        reply = json.dumps({"accepted": len(json.loads(body)["events"]) if status == 202 else 0, "rejected": 0, "errors": []}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("local", 0)


class Collector:
    """Records every batch the SDK posts; `status` sets the answer (202, or e.g. 503 to fail)."""

    def __init__(self, unix_path: str | None = None):
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.status = 202
        if unix_path:
            self.server = _UnixHTTPServer(unix_path, _Handler)
            self.url = f"unix://{unix_path}"
        else:
            self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            self.server.daemon_threads = True
            self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.server.collector = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def events(self) -> list[dict]:
        with self.lock:
            return [e for r in self.requests for e in r["events"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


TOOL_CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "weather"}'}},
    {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
]


def openai_completion(model: str, with_tools: bool) -> dict:
    message = {"role": "assistant", "content": None if with_tools else "All done.", "refusal": None}
    if with_tools:
        message["tool_calls"] = TOOL_CALLS
    return {
        "id": "chatcmpl-123", "object": "chat.completion", "created": 1_700_000_000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if with_tools else "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "prompt_tokens_details": {"cached_tokens": 20}},
    }


def openai_chunks(model: str) -> list[dict]:
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Looking"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                                                      "function": {"name": "search", "arguments": '{"q":'}}]}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}},
    ]


def anthropic_message(model: str) -> dict:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "weather"}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 40, "cache_read_input_tokens": 60, "cache_creation_input_tokens": 0},
    }


def anthropic_stream(model: str) -> list[tuple[str, dict]]:
    return [
        ("message_start", {"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant", "model": model,
                                                                 "content": [], "stop_reason": None, "stop_sequence": None,
                                                                 "usage": {"input_tokens": 70, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "tool_use", "id": "toolu_9", "name": "grep", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"p": "x"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 12}}),
        ("message_stop", {"type": "message_stop"}),
    ]


async def fake_provider(aiohttp_server):
    """A fake OpenAI + Anthropic API. Requests are recorded; model 'explode' answers 500."""
    seen: list[dict] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append({"path": request.path, "headers": dict(request.headers), "body": body})
        if body["model"] == "explode":
            return web.json_response({"error": {"message": "boom", "type": "server_error"}}, status=500)
        if body.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for chunk in openai_chunks(body["model"]):
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            return response
        with_tools = bool(body.get("tools")) and body["messages"][-1]["role"] != "tool"
        return web.json_response(openai_completion(body["model"] + "-2024-08-06", with_tools))

    async def messages(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append({"path": request.path, "headers": dict(request.headers), "body": body})
        if body.get("stream"):
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for name, data in anthropic_stream(body["model"]):
                await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            return response
        return web.json_response(anthropic_message(body["model"]))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/messages", messages)
    server = await aiohttp_server(app)
    server.seen = seen
    server.url = str(server.make_url("")).rstrip("/")
    return server


