"""The investigation loop: the model asks for tools, the daemon runs them over the tenant's data,
until the model answers. Bounded in steps, tool calls and tokens; a model failure is reported as
such, never replaced by an invented answer."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from daemon.investigate import llm, tools
from daemon.store.db import Store

MAX_STEPS = 6  # model calls per answer; the last one is offered no tools, so it must answer
MAX_TOOL_CALLS_PER_STEP = 5
MAX_TOKENS = 24_000  # total tokens per answer, as the model reports its usage
ANSWER_TOKENS = 1024  # max_tokens of each call
SYSTEM_PROMPT = (
    "You are svc's investigation agent. You answer questions about AI-agent evaluations (experiments, runs, scenarios, "
    "invariant evidence, traces and spans, scores, comparisons, reproducers) using only the read-only tools given. Call "
    "tools to gather facts before answering. Cite the ids (experiment, scenario, run, trace, span) behind every claim. "
    "If the tools do not show the answer, say what is missing instead of guessing. Be brief."
)


MAX_SOURCES = 8  # ids listed under an answer that cites none of the ids its tools read


def _ids(value: Any, found: list[str]) -> None:
    """Every string under a key `id` or `*_id` in a tool's arguments or answer, in order."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and (key == "id" or key.endswith("_id")) and 0 < len(item) <= 200 and item not in found:
                found.append(item)
            else:
                _ids(item, found)
    elif isinstance(value, list):
        for item in value:
            _ids(item, found)


def _parsed(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None


def with_sources(content: str, read: list[Any]) -> str:
    """The answer, with the ids its tools read appended when it cites none of them (answers cite ids)."""
    found: list[str] = []
    for value in read:
        _ids(value, found)
    if not found or any(ident in content for ident in found):
        return content
    return f"{content}\n\nSources: {', '.join(found[:MAX_SOURCES])}"


@dataclass
class Answer:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def _failure(exc: llm.ModelError, calls: list[dict[str, Any]]) -> Answer:
    return Answer(f"The investigation model failed ({exc.code}): {exc.message}. No answer was generated.", calls, exc.code)


async def investigate(store: Store, model: llm.Model, tenant_id: str, history: list[dict[str, str]], question: str) -> Answer:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, *history, {"role": "user", "content": question}]
    calls: list[dict[str, Any]] = []
    read: list[Any] = []  # the tools' arguments and answers, parsed: where the ids to cite come from
    used = 0
    for step in range(MAX_STEPS):
        last = step == MAX_STEPS - 1 or used >= MAX_TOKENS
        try:
            message, tokens = await llm.complete(model, messages, None if last else tools.specs(), ANSWER_TOKENS)
        except llm.ModelError as exc:
            return _failure(exc, calls)
        used += tokens
        requested = message.get("tool_calls") if not last else None
        if not requested:
            content = message.get("content")
            if not isinstance(content, str) or not content.strip():
                return _failure(llm.ModelError("unparsable", "the model gave an empty answer"), calls)
            return Answer(with_sources(content.strip(), read), calls)
        if not isinstance(requested, list):
            return _failure(llm.ModelError("unparsable", "the model's tool calls are not a list"), calls)
        requested = requested[:MAX_TOOL_CALLS_PER_STEP]
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": requested})
        for call in requested:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return _failure(llm.ModelError("unparsable", "a tool call has no function name"), calls)
            name, arguments = function["name"][:100], function.get("arguments")
            calls.append({"name": name, "arguments": arguments if isinstance(arguments, str) else str(arguments)[:2000]})
            result = await tools.run_tool(store, tenant_id, name, arguments)
            read += [_parsed(arguments), _parsed(result)]
            messages.append({"role": "tool", "tool_call_id": str(call.get("id") or name), "content": result})
    return _failure(llm.ModelError("budget", f"no answer within {MAX_STEPS} steps"), calls)
