"""One mapping from the GenAI span conventions in use to svc's trace-event fields.

Instrumentations name the same things differently: the OpenTelemetry GenAI semantic conventions
(current `gen_ai.usage.input_tokens` and the earlier `gen_ai.usage.prompt_tokens`), OpenLLMetry /
traceloop (`llm.request.type`, `traceloop.span.kind`, `traceloop.entity.*`), OpenInference
(`openinference.span.kind`, `llm.*`, `tool.*`, `input.value` / `output.value`; the OpenAI Agents SDK's
spans reach OTLP through it). `read(attrs, name)` returns what svc stores, whichever convention the
span follows; docs/traces-conventions.md is the table of every key, and each key below is listed there.
Keys are tried in the order written: the current convention first, then the older names.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# gen_ai.operation.name / llm.request.type values that are a call to a model
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion", "embeddings", "embedding", "rerank"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
# openinference.span.kind -> event type (AGENT, CHAIN, GUARDRAIL, RERANKER, EVALUATOR, PROMPT: span)
OPENINFERENCE_KINDS = {"LLM": "llm_call", "EMBEDDING": "llm_call", "TOOL": "tool_call", "RETRIEVER": "tool_call"}
# traceloop.span.kind -> event type (workflow, task, agent: span)
TRACELOOP_KINDS = {"tool": "tool_call"}

MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "llm.response.model", "llm.request.model")
INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt", "llm.usage.prompt_tokens")
OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion",
                     "llm.usage.completion_tokens")
CACHED_TOKEN_KEYS = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens", "gen_ai.usage.cached_tokens",
                     "llm.token_count.prompt_details.cache_read", "llm.usage.cache_read_input_tokens")
REASONING_TOKEN_KEYS = ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
                        "llm.token_count.completion_details.reasoning", "llm.usage.reasoning_tokens")
TOKEN_KEYS = frozenset(INPUT_TOKEN_KEYS + OUTPUT_TOKEN_KEYS)
TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name")
AGENT_KEYS = ("gen_ai.agent.name", "agent.name")
INPUT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.input.messages", "input.value", "traceloop.entity.input", "gen_ai.prompt",
              "gen_ai.prompt.0.content", "input")
OUTPUT_KEYS = ("gen_ai.tool.call.result", "gen_ai.output.messages", "output.value", "traceloop.entity.output", "gen_ai.completion",
               "gen_ai.completion.0.content", "output")
ERROR_TYPE_KEYS = ("error.type", "exception.type")
MAX_TOOL_CALLS = 32


@dataclass
class Mapped:
    """What svc keeps of one span: its event type and tool (or model-call) name, the cost inputs
    (None when the span carries none), the agent it names, its input and output."""

    event_type: str
    tool: str
    cost: dict[str, Any] | None = None
    agent: str | None = None
    input: Any = None
    output: Any = None
    error_type: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value not in (None, ""):
            return value
    return None


def count(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else max(0, int(value))
    except (TypeError, ValueError):
        return None


def _kind(attrs: dict[str, Any]) -> str:
    """The event type the span's own conventions give it."""
    openinference = attrs.get("openinference.span.kind")
    if isinstance(openinference, str) and openinference.upper() in OPENINFERENCE_KINDS:
        return OPENINFERENCE_KINDS[openinference.upper()]
    traceloop = attrs.get("traceloop.span.kind")
    if isinstance(traceloop, str) and traceloop.lower() in TRACELOOP_KINDS:
        return TRACELOOP_KINDS[traceloop.lower()]
    operation = attrs.get("gen_ai.operation.name")
    if operation == "execute_tool" or first(attrs, TOOL_NAME_KEYS) is not None:
        return "tool_call"
    if operation in LLM_OPERATIONS or attrs.get("llm.request.type") in LLM_OPERATIONS:
        return "llm_call"
    return "span"


def _agent(attrs: dict[str, Any]) -> str | None:
    agent = first(attrs, AGENT_KEYS)
    if agent is None and str(attrs.get("traceloop.span.kind") or "").lower() == "agent":
        agent = attrs.get("traceloop.entity.name")
    return None if agent in (None, "") else str(agent)


def _tool_calls(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools a model call asked for, [{id, name}], from whichever convention lists them."""
    calls: list[dict[str, Any]] = []
    # OpenInference: llm.output_messages.<i>.message.tool_calls.<j>.tool_call.function.name
    # OpenLLMetry before the GenAI message attributes: gen_ai.completion.<i>.tool_calls.<j>.name
    for key, value in attrs.items():
        if key.endswith(".tool_call.function.name") and key.startswith("llm.output_messages."):
            prefix = key[: -len("function.name")]
            calls.append({"id": attrs.get(prefix + "id"), "name": value})
        elif key.startswith("gen_ai.completion.") and ".tool_calls." in key and key.endswith(".name"):
            calls.append({"id": attrs.get(key[: -len("name")] + "id"), "name": value})
    # OpenTelemetry GenAI: gen_ai.output.messages = [{"role", "parts": [{"type": "tool_call", "id", "name", ...}]}]
    messages = attrs.get("gen_ai.output.messages")
    if not calls and isinstance(messages, str) and '"tool_call"' in messages:
        try:
            parsed = json.loads(messages)
        except ValueError:
            parsed = None
        for message in parsed if isinstance(parsed, list) else []:
            for part in (message.get("parts") or []) if isinstance(message, dict) else []:
                if isinstance(part, dict) and part.get("type") == "tool_call":
                    calls.append({"id": part.get("id"), "name": part.get("name")})
    return [{k: str(v)[:200] for k, v in c.items() if v not in (None, "")} for c in calls[:MAX_TOOL_CALLS]]


def read(attrs: dict[str, Any], name: str) -> Mapped:
    """A span's attributes (and its name) in svc's terms."""
    event_type = _kind(attrs)
    if event_type == "tool_call":
        tool = first(attrs, TOOL_NAME_KEYS) or attrs.get("traceloop.entity.name") or name
    else:
        tool = name
    mapped = Mapped(event_type=event_type, tool=str(tool), agent=_agent(attrs),
                    input=first(attrs, INPUT_KEYS), output=first(attrs, OUTPUT_KEYS), error_type=first(attrs, ERROR_TYPE_KEYS))
    model = first(attrs, MODEL_KEYS)
    if event_type == "llm_call" or any(key in attrs for key in TOKEN_KEYS):
        cost: dict[str, Any] = {
            "model": None if model is None else str(model),
            "input_tokens": count(first(attrs, INPUT_TOKEN_KEYS)),
            "output_tokens": count(first(attrs, OUTPUT_TOKEN_KEYS)),
        }
        for key, keys in (("cached_tokens", CACHED_TOKEN_KEYS), ("reasoning_tokens", REASONING_TOKEN_KEYS)):
            value = count(first(attrs, keys))
            if value is not None:
                cost[key] = value
        mapped.cost = cost
    if event_type == "llm_call":
        mapped.tool_calls = _tool_calls(attrs)
    return mapped
