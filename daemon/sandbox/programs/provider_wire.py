"""The providers' wire formats, read in one place: OpenAI Chat Completions and Responses, Anthropic
Messages, whole or streamed as server-sent events. Standard library only, because three readers
load it where svc's packages are not installed:

- the model gateway (`model_gateway.py`, beside this file in `/svc-programs`): usage, tool calls and
  errors of every call it records;
- the tracing SDK in the agent's container (`client/tracing/sdk.py`, shipped beside this file in
  `/opt/svc/python`): usage and tool calls of the calls it wraps;
- the daemon's ATIF export (`daemon/traces/atif.py`): the answer text of recorded calls.

Usage is `{input_tokens, output_tokens, cached_input_tokens}`: every prompt token counts as input
(Anthropic's cached ones included), `cached_input_tokens` is the part read from the prompt cache;
all None when the provider reported none (`NO_USAGE`). `reasoning_tokens(usage)` is apart: only the
SDK reports it.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

NO_USAGE = {"input_tokens": None, "output_tokens": None, "cached_input_tokens": None}


def as_int(v: Any) -> int | None:
    """`v` when it is an int (a bool is not), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def openai_usage(u: dict) -> dict[str, Any]:
    """Chat Completions (`prompt_tokens`...) or Responses (`input_tokens`...) usage; an answer with
    input tokens and no output count (embeddings) has 0 output tokens."""
    if "prompt_tokens" in u:
        inp, out, details = as_int(u.get("prompt_tokens")), as_int(u.get("completion_tokens")), u.get("prompt_tokens_details")
    else:
        inp, out, details = as_int(u.get("input_tokens")), as_int(u.get("output_tokens")), u.get("input_tokens_details")
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    if inp is not None or out is not None:
        out = out if out is not None else 0  # embeddings have no output
    return {"input_tokens": inp, "output_tokens": out, "cached_input_tokens": (cached or 0) if inp is not None else None}


def anthropic_usage(u: dict) -> dict[str, Any]:
    """Messages usage: every prompt token counts as input, cached ones included
    (`input_tokens + cache_creation_input_tokens + cache_read_input_tokens`)."""
    base = as_int(u.get("input_tokens"))
    read = as_int(u.get("cache_read_input_tokens")) or 0
    written = as_int(u.get("cache_creation_input_tokens")) or 0
    inp = None if base is None else base + read + written
    return {"input_tokens": inp, "output_tokens": as_int(u.get("output_tokens")),
            "cached_input_tokens": read if inp is not None else None}


def _chat_tools(message: dict) -> list[dict[str, Any]]:
    calls = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        calls.append({"id": tc.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")})
    fc = message.get("function_call")
    if isinstance(fc, dict):
        calls.append({"id": None, "name": fc.get("name"), "arguments": fc.get("arguments")})
    return calls


def _response_tools(output: list) -> list[dict[str, Any]]:
    calls = []
    for item in output or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.append({"id": item.get("call_id") or item.get("id"), "name": item.get("name"),
                          "arguments": item.get("arguments")})
        elif item.get("type") == "custom_tool_call":
            calls.append({"id": item.get("call_id") or item.get("id"), "name": item.get("name"),
                          "arguments": item.get("input")})
    return calls


def _anthropic_tool(block: dict, arguments: str | None = None) -> dict[str, Any]:
    if arguments is None:
        arguments = json.dumps(block.get("input") if block.get("input") is not None else {})
    return {"id": block.get("id"), "name": block.get("name"), "arguments": arguments}


def analyze_json(o: Any) -> tuple[str | None, dict[str, Any], list[dict[str, Any]]]:
    """(model, usage, tool calls) of a non-streamed answer of any of the three wire formats."""
    if not isinstance(o, dict):
        return None, dict(NO_USAGE), []
    model = o.get("model") if isinstance(o.get("model"), str) else None
    usage = o.get("usage") if isinstance(o.get("usage"), dict) else None
    if o.get("type") == "message" or (isinstance(o.get("content"), list) and o.get("role") == "assistant"):
        tools = [_anthropic_tool(b) for b in o.get("content") or []
                 if isinstance(b, dict) and b.get("type") in ("tool_use", "server_tool_use")]
        return model, anthropic_usage(usage) if usage else dict(NO_USAGE), tools
    if o.get("object") == "response" or isinstance(o.get("output"), list):
        return model, openai_usage(usage) if usage else dict(NO_USAGE), _response_tools(o.get("output"))
    tools = []
    for choice in o.get("choices") or []:
        if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
            tools += _chat_tools(choice["message"])
    return model, openai_usage(usage) if usage else dict(NO_USAGE), tools


_SSE_SPLIT = re.compile(r"\r\n\r\n|\n\n|\r\r")


def sse_events(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each server-sent event in `text`."""
    events = []
    for block in _SSE_SPLIT.split(text):
        name, data = None, []
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            events.append((name, "\n".join(data)))
    return events


def analyze_stream(text: str) -> tuple[str | None, dict[str, Any], list[dict[str, Any]], dict | None]:
    """(model, usage, tool calls, error) of a streamed answer of any of the three wire formats."""
    model: str | None = None
    usage: dict[str, Any] | None = None
    error: dict | None = None
    chat_tools: dict[tuple[int, int], dict[str, Any]] = {}
    final_response: dict | None = None
    response_items: dict[int, dict] = {}
    blocks: dict[int, dict] = {}
    anth_usage: dict[str, Any] = {}
    for _, data in sse_events(text):
        if data == "[DONE]":
            continue
        try:
            o = json.loads(data)
        except ValueError:
            continue
        if not isinstance(o, dict):
            continue
        kind = o.get("type") if isinstance(o.get("type"), str) else ""
        if "choices" in o or o.get("object") == "chat.completion.chunk":
            model = o.get("model") or model
            if isinstance(o.get("usage"), dict):
                usage = openai_usage(o["usage"])
            for ch in o.get("choices") or []:
                delta = ch.get("delta") if isinstance(ch, dict) else None
                for tc in (delta or {}).get("tool_calls") or []:
                    acc = chat_tools.setdefault((ch.get("index") or 0, tc.get("index") or 0),
                                                {"id": None, "name": "", "arguments": ""})
                    if tc.get("id"):
                        acc["id"] = tc["id"]
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        acc["name"] += fn["name"]
                    if fn.get("arguments"):
                        acc["arguments"] += fn["arguments"]
        elif kind.startswith("response."):
            r = o.get("response")
            if isinstance(r, dict):
                model = r.get("model") or model
                if kind in ("response.completed", "response.incomplete", "response.failed"):
                    final_response = r
                if kind == "response.failed" and isinstance(r.get("error"), dict):
                    error = {"type": str(r["error"].get("code") or "response_failed"),
                             "message": str(r["error"].get("message") or "")[:500]}
            if kind == "response.output_item.done" and isinstance(o.get("item"), dict):
                response_items[o.get("output_index") or len(response_items)] = o["item"]
        elif kind == "message_start":
            m = o.get("message") or {}
            model = m.get("model") or model
            anth_usage.update({k: v for k, v in (m.get("usage") or {}).items() if v is not None})
        elif kind == "content_block_start" and isinstance(o.get("content_block"), dict):
            blocks[o.get("index") or 0] = {**o["content_block"], "_json": ""}
        elif kind == "content_block_delta":
            delta = o.get("delta") or {}
            block = blocks.get(o.get("index") or 0)
            if block is not None and delta.get("type") == "input_json_delta":
                block["_json"] += delta.get("partial_json") or ""
        elif kind == "message_delta":
            anth_usage.update({k: v for k, v in (o.get("usage") or {}).items() if v is not None})
        elif kind == "error" and isinstance(o.get("error"), dict):
            error = {"type": str(o["error"].get("type") or "error"), "message": str(o["error"].get("message") or "")[:500]}
    if chat_tools:
        tools = [chat_tools[k] for k in sorted(chat_tools)]
    elif final_response is not None or response_items:
        if final_response is not None and final_response.get("output"):
            tools = _response_tools(final_response.get("output"))
        else:
            tools = _response_tools([response_items[k] for k in sorted(response_items)])
        if final_response is not None and isinstance(final_response.get("usage"), dict):
            usage = openai_usage(final_response["usage"])
    else:
        tools = [_anthropic_tool(b, b["_json"] or json.dumps(b.get("input") or {}))
                 for _, b in sorted(blocks.items()) if b.get("type") in ("tool_use", "server_tool_use")]
        if anth_usage:
            usage = anthropic_usage(anth_usage)
    return model, usage or dict(NO_USAGE), tools, error


def reasoning_tokens(u: Any) -> int | None:
    """The reasoning tokens of an OpenAI usage (`completion_tokens_details` or `output_tokens_details`)."""
    if not isinstance(u, dict):
        return None
    details = u.get("completion_tokens_details") or u.get("output_tokens_details")
    return as_int(details.get("reasoning_tokens")) if isinstance(details, dict) else None


def sse_json(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects carried by the `data:` of each server-sent event in `text` (`[DONE]` and
    what is not a JSON object skipped)."""
    for _, data in sse_events(text):
        if data == "[DONE]":
            continue
        try:
            item = json.loads(data)
        except ValueError:
            continue
        if isinstance(item, dict):
            yield item


def message_text(value: Any) -> str:
    """Message content of any wire format as plain text (parts joined; images named, not read)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for part in value:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                if isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                elif kind in ("image", "image_url", "input_image"):
                    pieces.append("[image]")
                elif "content" in part:
                    pieces.append(message_text(part.get("content")))
        return "\n".join(p for p in pieces if p)
    if isinstance(value, dict):
        return message_text(value.get("text") if "text" in value else value.get("content"))
    return json.dumps(value, default=str)


def answer_of(body: dict[str, Any]) -> tuple[str, str]:
    """(text, reasoning) of a whole answer: Chat Completions, Responses or Anthropic Messages."""
    text, reasoning = [], []
    if isinstance(body.get("choices"), list):
        for choice in body["choices"]:
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict):
                text.append(message_text(message.get("content")))
                reasoning.append(message_text(message.get("reasoning_content") or message.get("reasoning")))
    elif isinstance(body.get("output"), list):
        for item in body["output"]:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                text.append(message_text(item.get("content")))
            elif item.get("type") == "reasoning":
                reasoning.append(message_text(item.get("summary")))
    elif isinstance(body.get("content"), list):
        for block in body["content"]:
            if isinstance(block, dict) and block.get("type") == "text":
                text.append(str(block.get("text") or ""))
            elif isinstance(block, dict) and block.get("type") == "thinking":
                reasoning.append(str(block.get("thinking") or ""))
    return "".join(text), "\n".join(r for r in reasoning if r)


def stream_answer_of(raw: str) -> tuple[str, str]:
    """(text, reasoning) of a streamed answer: Chat Completions chunks, Responses events (the final
    response when there is one) or Anthropic content deltas."""
    text, reasoning = [], []
    for item in sse_json(raw):
        kind = item.get("type") if isinstance(item.get("type"), str) else ""
        if kind in ("response.completed", "response.incomplete") and isinstance(item.get("response"), dict):
            return answer_of(item["response"])
        if kind == "response.output_text.delta":
            text.append(str(item.get("delta") or ""))
        elif kind == "content_block_delta" and isinstance(item.get("delta"), dict):
            delta = item["delta"]
            if delta.get("type") == "text_delta":
                text.append(str(delta.get("text") or ""))
            elif delta.get("type") == "thinking_delta":
                reasoning.append(str(delta.get("thinking") or ""))
        for choice in item.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                text.append(message_text(delta.get("content")))
                reasoning.append(message_text(delta.get("reasoning_content") or delta.get("reasoning")))
    return "".join(text), "".join(reasoning)
