"""ATIF trajectories out of a run and into a trace (docs/how-to/atif.md has the mapping table).

Out (`export`): the agent's steps come from the run's model gateway recording when it has one (each
recorded call is an agent step: the answer's text and reasoning, the tool calls it asked for, the
tokens and price; the results of those tools are read from the next requests' tool messages), else
from the run's `llm_call` spans and the `tool_use` spans under them. The tools the agent traced itself
(`tool_call` spans) are the observations of the tool calls of the same name, or agent steps of their
own (`llm_call_count: 0`). The task prompt is the user step, the first request's system prompt the
system step. svc's results (verdict, invariants, cost, effects when the ledger has them) are under
`extra.svc`. Every string is scrubbed of credential-looking values and cut at TEXT_LIMIT.

In (`import_events`): a validated document (daemon/contract/atif.py) becomes one trace: a root span
for the trajectory, a span per system or user step, an `llm_call` per agent step (a `span` when the
step made no LLM call), a `tool_call` per tool call that has its observation (a `tool_use` invoked
when it has none), a `span` per observation without a tool call, and a `span` per embedded subagent
trajectory with its own steps below it. The events then go through the ingest path like any other
(truncation to 4 KB, scrubbing, pricing by the daemon's table), so judges and score rules read them
as they read a live trace.
"""
from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from daemon.sandbox.programs import provider_wire as wire
from daemon.contract.atif import MAX_STEPS, MAX_SUBAGENT_DEPTH, NAME_LENGTH, SCHEMA_VERSION, AtifContentPart, AtifStep, AtifTrajectory
from daemon.traces.ingest import BodyError, format_ts, new_span_id, new_trace_id, scrub, truncate
from daemon.traces.models import MAX_EVENTS_PER_REQUEST

TEXT_LIMIT = 64 * 1024  # bytes per exported string
MAX_RECORDING_LINES = 20_000
MAX_SPANS = 20_000
SOURCE = "atif"
GATEWAY = "gateway"


# -- out ---------------------------------------------------------------------------------------------

def _arguments(raw: Any) -> dict[str, Any]:
    """ATIF arguments are a JSON object: a JSON-object string is parsed, anything else is {"input": it}."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"input": raw}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if raw is None else {"input": raw}


def _name(value: Any) -> str:
    """An id or a name as the format bounds it (an agent's trace may hold longer ones)."""
    return str(value)[:NAME_LENGTH]


def _iso(ts: Any) -> str | None:
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        try:
            return format_ts(datetime.fromtimestamp(float(ts), timezone.utc))
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(ts, str) and ts:
        return ts
    return None


def read_recording_lines(lines: Iterable[Any]) -> list[dict[str, Any]]:
    """The finished calls of a gateway recording's lines, in call order (the admission lines of
    calls still open are left out; a call's final line wins)."""
    calls: dict[Any, dict[str, Any]] = {}
    for line in lines:
        if isinstance(line, dict) and not line.get("open") and isinstance(line.get("seq"), int):
            calls[line["seq"]] = line
    return sorted(calls.values(), key=lambda c: c["seq"])[:MAX_RECORDING_LINES]


def read_recording(path: Path) -> list[dict[str, Any]]:
    def lines() -> Iterable[Any]:
        with open(path, "rb") as fh:
            for count, raw in enumerate(fh):
                if count >= MAX_RECORDING_LINES * 2:
                    return
                try:
                    yield json.loads(raw.decode("utf-8", "surrogateescape"))
                except ValueError:
                    continue

    return read_recording_lines(lines())


def answer_text(line: dict[str, Any]) -> tuple[str, str]:
    """(text, reasoning) the model answered in one recorded call."""
    if line.get("stream") and isinstance(line.get("chunks"), list):
        raw = "".join(c[1] for c in line["chunks"] if isinstance(c, list) and len(c) == 2 and isinstance(c[1], str))
        return wire.stream_answer_of(raw)
    body = line.get("body")
    if not isinstance(body, str):
        return "", ""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body, ""
    return wire.answer_of(parsed) if isinstance(parsed, dict) else (body, "")


def _request_messages(request: Any) -> list[Any]:
    if not isinstance(request, dict):
        return []
    for key in ("messages", "input"):
        if isinstance(request.get(key), list):
            return request[key]
    return []


def tool_results(request: Any) -> dict[str, str]:
    """call id -> the tool's result, from one request's conversation (OpenAI `tool` messages,
    Anthropic `tool_result` blocks, Responses `function_call_output` items)."""
    out: dict[str, str] = {}
    for message in _request_messages(request):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool" and message.get("tool_call_id"):
            out[str(message["tool_call_id"])] = wire.message_text(message.get("content"))
        elif message.get("type") in ("function_call_output", "custom_tool_call_output") and message.get("call_id"):
            out[str(message["call_id"])] = wire.message_text(message.get("output"))
        elif isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id"):
                    out[str(block["tool_use_id"])] = wire.message_text(block.get("content"))
    return out


def system_prompt(request: Any) -> str:
    if not isinstance(request, dict):
        return ""
    if request.get("system") is not None:  # Anthropic
        return wire.message_text(request["system"])
    if isinstance(request.get("instructions"), str):  # Responses
        return request["instructions"]
    return "\n".join(wire.message_text(m.get("content")) for m in _request_messages(request)
                     if isinstance(m, dict) and m.get("role") in ("system", "developer"))


def first_user_message(request: Any) -> str:
    if isinstance(request, dict) and isinstance(request.get("input"), str):
        return request["input"]
    for message in _request_messages(request):
        if isinstance(message, dict) and message.get("role") == "user":
            return wire.message_text(message.get("content"))
    return ""


def _metrics(usage: Any, cost: Any, estimated: bool = False) -> dict[str, Any] | None:
    usage = usage if isinstance(usage, dict) else {}
    out: dict[str, Any] = {}
    for name, key in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens"),
                      ("cached_tokens", "cached_input_tokens"), ("cached_tokens", "cached_tokens")):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[name] = value
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
        out["cost_usd"] = float(cost)
    if estimated:
        out["extra"] = {"usage_estimated": True}
    return out or None


def steps_from_recording(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One agent step per recorded call; tool results found in any later request."""
    results: dict[str, str] = {}
    for line in calls:
        for call_id, text in tool_results(line.get("request")).items():
            results.setdefault(call_id, text)
    steps = []
    for line in calls:
        text, reasoning = answer_text(line)
        tool_calls = []
        for index, call in enumerate(line.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            tool_calls.append({"tool_call_id": _name(call.get("id") or f"call_{line.get('seq')}_{index}"),
                               "function_name": _name(call.get("name") or "?"), "arguments": _arguments(call.get("arguments"))})
        svc: dict[str, Any] = {"source": "model_gateway"}
        for key in ("seq", "provider", "method", "path", "status", "latency_ms", "ttft_ms", "stream", "replayed", "truncated"):
            if line.get(key) is not None:
                svc[key] = line[key]
        if isinstance(line.get("refused"), dict):
            svc["refused"] = line["refused"]
        if isinstance(line.get("error"), dict):
            svc["error"] = line["error"]
        step: dict[str, Any] = {"source": "agent", "message": text, "llm_call_count": 1, "extra": {"svc": svc}}
        if _iso(line.get("started")):
            step["timestamp"] = _iso(line.get("started"))
        if isinstance(line.get("model"), str):
            step["model_name"] = _name(line["model"])
        if reasoning:
            step["reasoning_content"] = reasoning
        if tool_calls:
            step["tool_calls"] = tool_calls
            found = [{"source_call_id": c["tool_call_id"], "content": results[c["tool_call_id"]]}
                     for c in tool_calls if c["tool_call_id"] in results]
            if found:
                step["observation"] = {"results": found}
        metrics = _metrics(line.get("usage"), line.get("cost_usd"), bool(line.get("usage_estimated")))
        if metrics:
            step["metrics"] = metrics
        steps.append(step)
    return steps


def _loads(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def steps_from_spans(spans: list[dict[str, Any]], skip_gateway: bool) -> list[dict[str, Any]]:
    """Agent steps from the run's trace: an `llm_call` span each (the tools it asked for are its
    `tool_use` children), then each `tool_call` span as the observation of the latest step's
    unanswered call of that tool, or as a step of its own."""
    asked: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        if span.get("event_type") == "tool_use" and span.get("parent_span_id"):
            asked.setdefault(span["parent_span_id"], []).append(span)
    results: dict[str, str] = {}
    for span in spans:  # the gateway's spans hold the request (cut to 4 KB): tool results where it parses
        if span.get("source") == GATEWAY and span.get("event_type") == "llm_call":
            messages = _loads(span.get("input"))
            if isinstance(messages, list):
                for call_id, text in tool_results({"messages": messages}).items():
                    results.setdefault(call_id, text)
    steps: list[dict[str, Any]] = []
    for span in spans:
        gateway = span.get("source") == GATEWAY
        if span.get("event_type") == "llm_call" and not (skip_gateway and gateway):
            cost: dict[str, Any] = span["cost"] if isinstance(span.get("cost"), dict) else {}
            message = span.get("output") or ""
            if gateway and message:  # the provider's answer as it came (JSON, or server-sent events)
                line = {"body": message} if message.lstrip().startswith("{") else {"stream": True, "chunks": [[0, message]]}
                message = answer_text(line)[0] or message
            step: dict[str, Any] = {"source": "agent", "message": message, "llm_call_count": 1,
                                    "extra": {"svc": {"source": "trace", "span_id": span.get("span_id"),
                                                      "trace_id": span.get("trace_id"), "status": span.get("status")}}}
            if span.get("started_at"):
                step["timestamp"] = span["started_at"]
            if cost.get("model"):
                step["model_name"] = _name(cost["model"])
            metrics = _metrics(cost, cost.get("estimated_usd"))
            if metrics:
                step["metrics"] = metrics
            calls = []
            for index, child in enumerate(asked.get(span.get("span_id") or "", [])):
                meta: dict[str, Any] = child["metadata"] if isinstance(child.get("metadata"), dict) else {}
                calls.append({"tool_call_id": _name(meta.get("call_id") or child.get("span_id") or f"call_{index}"),
                              "function_name": _name(child.get("tool") or "?"), "arguments": _arguments(_loads(child.get("input")))})
            if calls:
                step["tool_calls"] = calls
                found = [{"source_call_id": c["tool_call_id"], "content": results[c["tool_call_id"]]}
                         for c in calls if c["tool_call_id"] in results]
                if found:
                    step["observation"] = {"results": found}
            steps.append(step)
        elif span.get("event_type") == "tool_call" and not gateway:
            _attach_tool(steps, span)
    return steps


def _attach_tool(steps: list[dict[str, Any]], span: dict[str, Any]) -> None:
    name = _name(span.get("tool") or "?")
    output = span.get("output") if span.get("output") is not None else (span.get("error_type") or "")
    for step in reversed(steps):
        answered = {r["source_call_id"] for r in (step.get("observation") or {}).get("results", [])}
        for call in step.get("tool_calls") or []:
            if call["function_name"] == name and call["tool_call_id"] not in answered:
                step.setdefault("observation", {"results": []})["results"].append(
                    {"source_call_id": call["tool_call_id"], "content": str(output),
                     "extra": {"svc": {"span_id": span.get("span_id"), "status": span.get("status")}}})
                return
        if step.get("tool_calls"):
            break  # only the latest step that asked for tools may own this execution
    call_id = _name(span.get("span_id") or f"tool_{len(steps)}")
    step = {"source": "agent", "message": "", "llm_call_count": 0,
            "tool_calls": [{"tool_call_id": call_id, "function_name": name, "arguments": _arguments(_loads(span.get("input")))}],
            "observation": {"results": [{"source_call_id": call_id, "content": str(output)}]},
            "extra": {"svc": {"source": "trace", "span_id": span.get("span_id"), "status": span.get("status")}}}
    if span.get("started_at"):
        step["timestamp"] = span["started_at"]
    steps.append(step)


def _agent(run: dict[str, Any], described: dict[str, Any] | None, steps: list[dict[str, Any]]) -> dict[str, Any]:
    info: dict[str, Any] = described if isinstance(described, dict) else (
        run["agent"] if isinstance(run.get("agent"), dict) else {})
    models = Counter(s["model_name"] for s in steps if s.get("model_name"))
    agent: dict[str, Any] = {"name": str(info.get("name") or "agent"), "version": str(info.get("version") or "unknown")}
    if models:
        agent["model_name"] = models.most_common(1)[0][0]
    extra = {k: info[k] for k in ("type", "snapshot_id", "digest", "image", "model") if info.get(k) is not None}
    if extra:
        agent["extra"] = {"svc": extra}
    return agent


SVC_RUN_FIELDS = ("id", "spec_id", "spec_version", "seed", "status", "verdict", "reason", "score", "invariant_results",
                  "forbidden_results", "violations", "cost", "models", "experiment_id", "scenario_id", "replay_of",
                  "reproducer", "duration_ms", "started_at", "finished_at", "error")


def _final_metrics(steps: list[dict[str, Any]], run_cost: Any) -> dict[str, Any]:
    totals: dict[str, Any] = {"total_steps": len(steps)}
    for total, key in (("total_prompt_tokens", "prompt_tokens"), ("total_completion_tokens", "completion_tokens"),
                       ("total_cached_tokens", "cached_tokens")):
        values = [s["metrics"][key] for s in steps if key in (s.get("metrics") or {})]
        if values:
            totals[total] = sum(values)
    usd = run_cost.get("total_usd") if isinstance(run_cost, dict) else None
    if not isinstance(usd, (int, float)) or isinstance(usd, bool):
        costs = [s["metrics"]["cost_usd"] for s in steps if "cost_usd" in (s.get("metrics") or {})]
        usd = sum(costs) if costs else None
    if usd is not None:
        totals["total_cost_usd"] = float(usd)
    return totals


def _capped(value: Any, depth: int = 0) -> Any:
    """Strings cut at TEXT_LIMIT, everything scrubbed of credential-looking values."""
    if depth > 64:
        return "[too deep]"
    if isinstance(value, str):
        return truncate(value, TEXT_LIMIT)
    if isinstance(value, dict):
        return {str(k): _capped(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v, depth + 1) for v in value]
    return value


def build(run: dict[str, Any], task: dict[str, Any] | None, described: dict[str, Any] | None,
          calls: list[dict[str, Any]], spans: list[dict[str, Any]], effects: Any = None) -> dict[str, Any]:
    """The ATIF document of a finished run (see the module's docstring)."""
    head: list[dict[str, Any]] = []
    first_request = calls[0].get("request") if calls else None
    system = system_prompt(first_request)
    if system:
        head.append({"source": "system", "message": system})
    prompt = (task or {}).get("prompt") if isinstance((task or {}).get("prompt"), str) else None
    prompt = prompt or first_user_message(first_request)
    if prompt:
        head.append({"source": "user", "message": prompt})
    if calls:
        agent_steps = steps_from_recording(calls)
        for span in spans:  # the tools the agent ran and traced itself
            if span.get("event_type") == "tool_call" and span.get("source") != GATEWAY:
                _attach_tool(agent_steps, span)
    else:
        agent_steps = steps_from_spans(spans, skip_gateway=False)
    agent_steps.sort(key=lambda s: s.get("timestamp") or "")
    steps = head + agent_steps
    notes = ["Written by svc from the run's " + ("model gateway recording" if calls else "trace") + "."]
    if len(steps) > MAX_STEPS:
        notes.append(f"The run had {len(steps)} steps; the first {MAX_STEPS} are kept.")
        steps = steps[:MAX_STEPS]
    for index, step in enumerate(steps):
        step["step_id"] = index + 1
    svc = {k: run.get(k) for k in SVC_RUN_FIELDS if run.get(k) is not None}
    svc["run_id"] = svc.pop("id", run.get("id"))
    if effects is not None:
        svc["effects"] = effects
    doc = {
        "schema_version": SCHEMA_VERSION, "session_id": run.get("id"), "trajectory_id": run.get("id"),
        "agent": _agent(run, described, steps), "steps": steps, "notes": " ".join(notes),
        "final_metrics": _final_metrics(steps, run.get("cost")), "extra": {"svc": svc},
    }
    return scrub(_capped(doc))


# -- in ----------------------------------------------------------------------------------------------

def content_text(content: str | list[AtifContentPart] | None) -> str | None:
    """Text of a message or observation; images and audio are named by their path, never read."""
    if content is None or isinstance(content, str):
        return content
    pieces = []
    for part in content:
        if part.type == "text":
            pieces.append(part.text or "")
        elif part.source is not None:
            pieces.append(f"[{part.type} {part.source.media_type} {part.source.path}]")
    return "\n".join(pieces)


def _ts(value: str | None) -> str | None:
    if value is None:
        return None
    return format_ts(datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00")))


def _short(value: str | None, limit: int) -> str | None:
    return None if value is None else value[:limit]


class _Importer:
    def __init__(self, stamps: dict[str, Any]):
        self.stamps = stamps
        self.trace_id = new_trace_id()
        self.events: list[dict[str, Any]] = []
        self.steps = 0

    def add(self, event: dict[str, Any]) -> dict[str, Any]:
        if len(self.events) >= MAX_EVENTS_PER_REQUEST:
            raise BodyError(f"the trajectory makes more than {MAX_EVENTS_PER_REQUEST} trace events (steps, tool calls "
                            "and observations); split it", "steps")
        event = {k: v for k, v in event.items() if v is not None}
        event.update({k: v for k, v in self.stamps.items() if v is not None})
        event["trace_id"] = self.trace_id
        self.events.append(event)
        return event

    def trajectory(self, doc: AtifTrajectory, parent: str | None, loc: str, depth: int) -> str:
        if depth > MAX_SUBAGENT_DEPTH:
            raise BodyError(f"{loc}: subagent trajectories nest more than {MAX_SUBAGENT_DEPTH} deep", loc)
        span = new_span_id()
        first_ts = next((_ts(s.timestamp) for s in doc.steps if s.timestamp), None)
        user = next((content_text(s.message) for s in doc.steps if s.source == "user"), None)
        last = next((content_text(s.message) for s in reversed(doc.steps) if s.source == "agent"), None)
        metadata: dict[str, Any] = {"source": SOURCE, "schema_version": doc.schema_version}
        for key in ("session_id", "trajectory_id", "continued_trajectory_ref"):
            if getattr(doc, key) is not None:
                metadata[key] = getattr(doc, key)
        if doc.agent.model_name:
            metadata["model_name"] = doc.agent.model_name
        if doc.notes:
            metadata["notes"] = doc.notes[:2000]
        if doc.final_metrics is not None:
            metadata["final_metrics"] = doc.final_metrics.model_dump(exclude_none=True)
        if doc.extra:
            metadata["extra"] = doc.extra
        self.add({"event_type": "span", "phase": "complete", "span_id": span, "parent_span_id": parent,
                  "tool": f"atif {doc.agent.name}"[:200], "ts": first_ts, "input": user, "output": last, "metadata": metadata,
                  "agent": doc.agent.name[:200], "agent_version": doc.agent.version[:64]})
        embedded = {sub.trajectory_id: (index, sub) for index, sub in enumerate(doc.subagents())}
        used: set[str] = set()
        context: str | None = None
        for index, step in enumerate(doc.steps):
            self.steps += 1
            context = self.step(doc, step, span, context, embedded, used, f"{loc}steps.{index}", depth)
        for trajectory_id, (index, sub) in embedded.items():  # embedded but not referenced: under the root
            if trajectory_id not in used:
                self.trajectory(sub, span, f"{loc}subagent_trajectories.{index}.", depth + 1)
        return span

    def step(self, doc: AtifTrajectory, step: AtifStep, parent: str, context: str | None,
             embedded: dict[Any, tuple[int, AtifTrajectory]], used: set[str], loc: str, depth: int) -> str | None:
        ts = _ts(step.timestamp)
        text = content_text(step.message)
        meta: dict[str, Any] = {"source": SOURCE, "atif_step_id": step.step_id, "atif_source": step.source}
        if step.extra:
            meta["extra"] = step.extra
        if step.is_copied_context is not None:
            meta["is_copied_context"] = step.is_copied_context
        span = new_span_id()
        if step.source != "agent":
            self.add({"event_type": "span", "phase": "complete", "span_id": span, "parent_span_id": parent, "ts": ts,
                      "tool": f"{step.source} message", "input": text, "metadata": meta,
                      "agent": doc.agent.name[:200], "agent_version": doc.agent.version[:64]})
            return text
        model = step.model_name or doc.agent.model_name
        if step.reasoning_content:
            meta["reasoning_content"] = step.reasoning_content[:4000]
        if step.reasoning_effort is not None:
            meta["reasoning_effort"] = step.reasoning_effort
        if step.llm_call_count is not None:
            meta["llm_call_count"] = step.llm_call_count
        cost = None
        if step.metrics is not None:
            m = step.metrics
            if m.cost_usd is not None:
                meta["reported_cost_usd"] = m.cost_usd
            if m.extra:
                meta["metrics_extra"] = m.extra
            cost = {"model": _short(model, 200), "input_tokens": m.prompt_tokens, "output_tokens": m.completion_tokens,
                    "cached_tokens": m.cached_tokens}
        elif model and step.llm_call_count != 0:
            cost = {"model": _short(model, 200)}
        self.add({"event_type": "span" if step.llm_call_count == 0 else "llm_call", "phase": "complete", "span_id": span,
                  "parent_span_id": parent, "ts": ts, "tool": _short(model, 200) or "agent step", "input": context,
                  "output": text, "metadata": meta, "cost": cost,
                  "agent": doc.agent.name[:200], "agent_version": doc.agent.version[:64]})
        results = list(step.observation.results) if step.observation is not None else []
        by_call: dict[str, Any] = {}
        for result in results:
            if result.source_call_id is not None:
                by_call.setdefault(result.source_call_id, result)
        observed: list[str] = []
        for call in step.tool_calls or []:
            result = by_call.pop(call.tool_call_id, None)
            output = content_text(result.content) if result is not None else None
            call_meta: dict[str, Any] = {"source": SOURCE, "call_id": call.tool_call_id, "atif_step_id": step.step_id}
            if call.extra:
                call_meta["extra"] = call.extra
            child = new_span_id()
            self.add({"event_type": "tool_call" if result is not None else "tool_use",
                      "phase": "complete" if result is not None else "invoked", "span_id": child, "parent_span_id": span,
                      "ts": ts, "tool": call.function_name[:200], "input": call.arguments, "output": output,
                      "metadata": call_meta, "agent": doc.agent.name[:200], "agent_version": doc.agent.version[:64]})
            if result is not None:
                observed.append(output or "")
                self.refs(result, child, embedded, used, loc, depth)
        for result in results:
            if result.source_call_id is not None and result.source_call_id not in by_call:
                continue  # answered a tool call above
            child = new_span_id()
            output = content_text(result.content)
            observed.append(output or "")
            self.add({"event_type": "span", "phase": "complete", "span_id": child, "parent_span_id": span, "ts": ts,
                      "tool": "observation", "output": output,
                      "metadata": {"source": SOURCE, "atif_step_id": step.step_id, **({"extra": result.extra} if result.extra else {}),
                                   **({"source_call_id": result.source_call_id} if result.source_call_id else {})},
                      "agent": doc.agent.name[:200], "agent_version": doc.agent.version[:64]})
            self.refs(result, child, embedded, used, loc, depth)
        return "\n".join(observed) if observed else text

    def refs(self, result: Any, parent: str, embedded: dict[Any, tuple[int, AtifTrajectory]], used: set[str], loc: str,
             depth: int) -> None:
        """Embedded subagents a result refers to become a subtree under it; a path is kept as text."""
        for ref in result.subagent_trajectory_ref or []:
            if ref.trajectory_id is not None and ref.trajectory_id in embedded and ref.trajectory_id not in used:
                used.add(ref.trajectory_id)
                index, sub = embedded[ref.trajectory_id]
                self.trajectory(sub, parent, f"subagent_trajectories.{index}.", depth + 1)
            elif ref.trajectory_path is not None:
                self.add({"event_type": "span", "phase": "complete", "span_id": new_span_id(), "parent_span_id": parent,
                          "tool": "subagent (not embedded)",
                          "metadata": {"source": SOURCE, "trajectory_path": ref.trajectory_path, "followed": False,
                                       **({"session_id": ref.session_id} if ref.session_id else {})}})


def import_events(doc: AtifTrajectory, stamps: dict[str, Any]) -> tuple[str, int, list[dict[str, Any]]]:
    """(trace id, steps read, TraceEventIn-shaped events) of a validated document; BodyError when
    it makes too many events or nests subagents too deep."""
    importer = _Importer(stamps)
    importer.trajectory(doc, None, "", 0)
    return importer.trace_id, importer.steps, importer.events
