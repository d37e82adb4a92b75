"""A fake model provider for the GenAI convention tests: OpenAI chat completions (plain, tool
calling, streamed), the OpenAI Responses API (plain, tool calling, streamed) and Anthropic Messages
(plain and streamed), each answering with fixed token counts, so every client and instrumentation
that makes the same three calls must come out with the same tokens and cost.

The three calls of an agent turn: a model call that asks for the `get_weather` tool (TOOL_TURN), the
call that reads the tool's result and answers (FINAL_TURN), and a streamed call (STREAM_TURN)."""
from __future__ import annotations

import json
import threading
from typing import Any

from aiohttp import web

from tests.support.threaded_server import ThreadedServer

MODEL = "gpt-4o-mini"
SERVED_MODEL = "gpt-4o-mini-2024-07-18"
CLAUDE = "claude-haiku-4-5-20251001"
FAILING_MODEL = "explode"  # answers 500
TOOL = "get_weather"
TOOL_ARGUMENTS = '{"city": "Paris"}'
# (input, output, cached input, reasoning) tokens of each turn
TOOL_TURN = (120, 30, 20, 0)
FINAL_TURN = (200, 12, 100, 4)
STREAM_TURN = (50, 9, 0, 0)
ANSWER = "Sunny in Paris."
STREAMED = ["Streamed ", "answer."]


def _chat_usage(turn: tuple[int, int, int, int]) -> dict[str, Any]:
    inp, out, cached, reasoning = turn
    return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def _responses_usage(turn: tuple[int, int, int, int]) -> dict[str, Any]:
    inp, out, cached, reasoning = turn
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": inp + out}


def _anthropic_usage(turn: tuple[int, int, int, int]) -> dict[str, Any]:
    # Anthropic counts cache reads apart from input_tokens; svc's input is the sum
    inp, out, cached, _ = turn
    return {"input_tokens": inp - cached, "output_tokens": out, "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}


def _served(model: str) -> str:
    return SERVED_MODEL if model == MODEL else model


class ConventionProvider(ThreadedServer):
    """`url` ends in /v1 (OpenAI's base_url); Anthropic clients take `root` as their base_url.
    `requests` records every request body. With `usage=False` OpenAI streams and responses carry
    no usage at all (Anthropic always sends it)."""

    base_path = "/v1"
    thread_name = "convention-provider"

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.usage = True
        self._lock = threading.Lock()

    @property
    def root(self) -> str:
        return self.url[: -len("/v1")]

    async def _body(self, request: web.Request) -> dict[str, Any]:
        body = await request.json()
        with self._lock:
            self.requests.append({"path": request.path, "body": body})
        return body

    @staticmethod
    async def _sse(request: web.Request, events: list[tuple[str | None, Any]]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            await response.write(((f"event: {name}\n" if name else "") + f"data: {payload}\n\n").encode())
        await response.write_eof()
        return response

    # -- chat completions ----------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if body["model"] == FAILING_MODEL:
            return web.json_response({"error": {"message": "the model is overloaded", "type": "server_error"}}, status=500)
        model = _served(body["model"])
        base = {"id": "chatcmpl-conv", "created": 1_700_000_000, "model": model, "system_fingerprint": "fp_conv"}
        if body.get("stream"):
            chunk = {**base, "object": "chat.completion.chunk"}
            events: list[tuple[str | None, Any]] = [
                (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": STREAMED[0]}, "finish_reason": None}]}),
                (None, {**chunk, "choices": [{"index": 0, "delta": {"content": STREAMED[1]}, "finish_reason": None}]}),
                (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            ]
            if self.usage and (body.get("stream_options") or {}).get("include_usage"):
                events.append((None, {**chunk, "choices": [], "usage": _chat_usage(STREAM_TURN)}))
            events.append((None, "[DONE]"))
            return await self._sse(request, events)
        messages = body.get("messages") or []
        if body.get("tools") and not any(m.get("role") == "tool" for m in messages):
            message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": TOOL, "arguments": TOOL_ARGUMENTS}}]}
            finish, turn = "tool_calls", TOOL_TURN
        else:
            message, finish, turn = {"role": "assistant", "content": ANSWER, "refusal": None}, "stop", FINAL_TURN
        return web.json_response({**base, "object": "chat.completion", "usage": _chat_usage(turn),
                                  "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}]})

    # -- responses -----------------------------------------------------------------------------------

    def _response(self, body: dict[str, Any], output: list[dict[str, Any]], turn: tuple[int, int, int, int] | None,
                  status: str = "completed") -> dict[str, Any]:
        return {
            "id": "resp_conv", "object": "response", "created_at": 1_700_000_000, "status": status, "error": None,
            "incomplete_details": None, "instructions": body.get("instructions"), "model": _served(body["model"]),
            "output": output, "parallel_tool_calls": True, "temperature": 1.0, "tool_choice": "auto",
            "tools": body.get("tools") or [], "top_p": 1.0, "max_output_tokens": None, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": _responses_usage(turn) if turn and self.usage else None, "metadata": {}, "store": False,
        }

    @staticmethod
    def _message(text: str) -> dict[str, Any]:
        return {"type": "message", "id": "msg_conv", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        items = body.get("input")
        items = items if isinstance(items, list) else []
        if body.get("stream"):
            final = self._response(body, [self._message("".join(STREAMED))], STREAM_TURN)
            start = {**self._response(body, [], None, "in_progress")}
            text_item = {**self._message(""), "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events: list[dict[str, Any]] = [
                {"type": "response.created", "response": start},
                {"type": "response.in_progress", "response": start},
                {"type": "response.output_item.added", "output_index": 0, "item": text_item},
                {"type": "response.content_part.added", "item_id": "msg_conv", "output_index": 0, "content_index": 0, "part": part},
                *({"type": "response.output_text.delta", "item_id": "msg_conv", "output_index": 0, "content_index": 0,
                   "delta": piece, "logprobs": []} for piece in STREAMED),
                {"type": "response.output_text.done", "item_id": "msg_conv", "output_index": 0, "content_index": 0,
                 "text": "".join(STREAMED), "logprobs": []},
                {"type": "response.content_part.done", "item_id": "msg_conv", "output_index": 0, "content_index": 0,
                 "part": {**part, "text": "".join(STREAMED)}},
                {"type": "response.output_item.done", "output_index": 0, "item": self._message("".join(STREAMED))},
                {"type": "response.completed", "response": final},
            ]
            for number, event in enumerate(events):
                event["sequence_number"] = number
            return await self._sse(request, [(event["type"], event) for event in events])
        answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        if body.get("tools") and not answered:
            output = [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": TOOL,
                       "arguments": TOOL_ARGUMENTS, "status": "completed"}]
            return web.json_response(self._response(body, output, TOOL_TURN))
        return web.json_response(self._response(body, [self._message(ANSWER)], FINAL_TURN))

    # -- anthropic messages --------------------------------------------------------------------------

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        model = body["model"]
        if body.get("stream"):
            start_usage = {**_anthropic_usage(STREAM_TURN), "output_tokens": 1}
            events: list[tuple[str | None, Any]] = [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_s", "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                *(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
                  for piece in STREAMED),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                   "usage": {"output_tokens": STREAM_TURN[1]}}),
                ("message_stop", {"type": "message_stop"}),
            ]
            return await self._sse(request, events)
        messages = body.get("messages") or []
        answered = any(isinstance(m.get("content"), list) and any(isinstance(c, dict) and c.get("type") == "tool_result"
                                                                     for c in m["content"]) for m in messages)
        if body.get("tools") and not answered:
            content = [{"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": json.loads(TOOL_ARGUMENTS)}]
            stop, turn = "tool_use", TOOL_TURN
        else:
            content, stop, turn = [{"type": "text", "text": ANSWER}], "end_turn", FINAL_TURN
        return web.json_response({"id": "msg_conv", "type": "message", "role": "assistant", "model": model, "content": content,
                                  "stop_reason": stop, "stop_sequence": None, "usage": _anthropic_usage(turn)})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self._messages)


def turn_usd(turn: tuple[int, int, int, int], prices: tuple[float, float, float] = (0.15, 0.60, 0.075)) -> float:
    """The daemon's price of one turn of gpt-4o-mini (USD per 1M tokens: input, output, cached input)."""
    inp, out, cached, _ = turn
    return ((inp - cached) * prices[0] + cached * prices[2] + out * prices[1]) / 1e6


TOOLS = [{"type": "function", "function": {"name": TOOL, "description": "The weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def three_chat_calls(client: Any) -> list[Any]:
    """The three calls with an `openai.OpenAI` client's chat completions: the tool turn, the final
    turn (after the tool's result) and a streamed turn that asks for usage. Returns the replies
    (the stream's chunks as a list)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True,
                                                 stream_options={"include_usage": True}))
    return [first, second, chunks]


class SpanCapture:
    """A real OpenTelemetry SDK tracer provider whose spans are kept in memory and then encoded by
    the OTLP exporter's own encoder: `body()` is the protobuf ExportTraceServiceRequest the
    OTLP/HTTP exporter would have posted, so a test can post it to each daemon it starts."""

    def __init__(self, **resource: str) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "convention-test", **resource}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def body(self) -> bytes:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        self.provider.force_flush()
        return encode_spans(self.exporter.get_finished_spans()).SerializeToString()
