"""ATIF out of recorded model calls and trace spans, and into trace events: the documents svc writes
validate with the `atif` package's models (Harbor's RFC, independently implemented), and a document
in a Harbor agent's layout becomes the events the ingest stores."""
from __future__ import annotations

import json

import pytest
from atif import Trajectory as Reference

from daemon.contract.atif import AtifTrajectory as Trajectory
from daemon.traces import atif
from daemon.traces.ingest import prepare_events

TOOLS = [{"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}]


def chat_call(seq: int, messages: list, answer: dict, usage: tuple[int, int], tool_calls: list | None = None) -> dict:
    return {"seq": seq, "provider": "openai", "method": "POST", "path": "/chat/completions", "status": 200, "stream": False,
            "request": {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS}, "body": json.dumps(answer),
            "started": 1764340000.0 + seq, "latency_ms": 12.5, "model": "gpt-4o-mini",
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "cached_input_tokens": 0},
            "cost_usd": 0.0001 * seq, "tool_calls": tool_calls or []}


def anthropic_stream_call(seq: int) -> dict:
    events = [
        ("message_start", {"type": "message_start", "message": {"model": "claude-3-5-haiku", "usage": {"input_tokens": 7}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "all "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "done"}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    chunks = [[i, f"event: {name}\ndata: {json.dumps(data)}\n\n"] for i, (name, data) in enumerate(events)]
    return {"seq": seq, "provider": "anthropic", "method": "POST", "path": "/v1/messages", "status": 200, "stream": True,
            "request": {"model": "claude-3-5-haiku", "system": "be brief", "messages": [{"role": "user", "content": "x"}]},
            "chunks": chunks, "started": 1764340000.0 + seq, "model": "claude-3-5-haiku",
            "usage": {"input_tokens": 7, "output_tokens": 3, "cached_input_tokens": 0}, "cost_usd": 0.00001, "tool_calls": []}


RUN = {"id": "run_abc", "spec_id": "demo", "spec_version": 2, "seed": "7", "status": "passed", "verdict": "pass", "score": 1.0,
       "invariant_results": [{"invariant_id": "answer", "status": "passed", "score": 1.0}], "forbidden_results": [],
       "violations": [], "cost": {"total_usd": 0.0003, "input_tokens": 300, "output_tokens": 30}, "agent": {"name": "demo-agent"}}


def recorded_calls() -> list[dict]:
    first = chat_call(1, [{"role": "system", "content": "You write files."}, {"role": "user", "content": "write A"}],
                      {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "call_1", "type": "function", "function": {"name": "write", "arguments": "{\"text\": \"A\"}"}}]}}]},
                      (100, 20), [{"id": "call_1", "name": "write", "arguments": "{\"text\": \"A\"}"}])
    second = chat_call(2, [{"role": "system", "content": "You write files."}, {"role": "user", "content": "write A"},
                           {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                                                 "function": {"name": "write", "arguments": "{}"}}]},
                           {"role": "tool", "tool_call_id": "call_1", "content": "wrote 1 byte"}],
                       {"choices": [{"message": {"role": "assistant", "content": "Done: A is written."}}]}, (150, 10))
    return [{"seq": 1, "open": True, "held_tokens": 5}, first, second, anthropic_stream_call(3)]


def test_a_recorded_run_is_a_valid_atif_trajectory_with_its_verdict():
    calls = atif.read_recording_lines(recorded_calls())
    doc = atif.build(RUN, {"prompt": "write A"}, None, calls, [], effects=None)
    reference = Reference.model_validate(doc)
    Trajectory.model_validate(doc)
    assert [s.source for s in reference.steps] == ["system", "user", "agent", "agent", "agent"]
    assert reference.steps[0].message == "You write files." and reference.steps[1].message == "write A"
    asked = reference.steps[2]
    assert [(c.tool_call_id, c.function_name, c.arguments) for c in asked.tool_calls] == [("call_1", "write", {"text": "A"})]
    assert [(r.source_call_id, r.content) for r in asked.observation.results] == [("call_1", "wrote 1 byte")]
    assert (asked.metrics.prompt_tokens, asked.metrics.completion_tokens, asked.model_name) == (100, 20, "gpt-4o-mini")
    assert reference.steps[3].message == "Done: A is written."
    assert (reference.steps[4].message, reference.steps[4].reasoning_content) == ("all done", "hmm")
    assert reference.final_metrics.total_prompt_tokens == 257 and reference.final_metrics.total_cost_usd == 0.0003
    svc = reference.extra["svc"]
    assert (svc["run_id"], svc["verdict"], svc["invariant_results"][0]["invariant_id"]) == ("run_abc", "pass", "answer")
    assert reference.agent.name == "demo-agent" and reference.agent.model_name == "gpt-4o-mini"


def test_a_run_without_a_recording_is_written_from_its_spans():
    spans = [
        {"span_id": "s1", "event_type": "llm_call", "started_at": "2026-01-01T00:00:01.000000Z", "output": "calling search",
         "cost": {"model": "gpt-4o", "input_tokens": 10, "output_tokens": 2, "estimated_usd": 0.001}, "source": "sandbox"},
        {"span_id": "s2", "parent_span_id": "s1", "event_type": "tool_use", "tool": "search", "input": "{\"q\": \"x\"}",
         "metadata": {"call_id": "c9"}, "source": "sandbox", "started_at": "2026-01-01T00:00:01.000000Z"},
        {"span_id": "s3", "event_type": "tool_call", "tool": "search", "input": "{\"q\": \"x\"}", "output": "sunny",
         "source": "sandbox", "started_at": "2026-01-01T00:00:02.000000Z"},
        {"span_id": "s4", "event_type": "tool_call", "tool": "ls", "input": "not json", "output": "a b",
         "source": "sandbox", "started_at": "2026-01-01T00:00:03.000000Z"},
    ]
    doc = atif.build(RUN, {"prompt": "go"}, None, [], spans)
    reference = Reference.model_validate(doc)
    asked, own = reference.steps[1], reference.steps[2]
    assert [(r.source_call_id, r.content) for r in asked.observation.results] == [("c9", "sunny")]
    assert (own.llm_call_count, own.tool_calls[0].function_name, own.tool_calls[0].arguments) == (0, "ls", {"input": "not json"})


def test_credentials_in_recorded_text_are_not_exported():
    calls = recorded_calls()[1:2]
    calls[0]["request"]["messages"][1]["content"] = "use sk-proj-abcdefghijklmnopqrstuvwxyz please"
    doc = atif.build(RUN, None, None, calls, [])
    assert "abcdefghijklmnop" not in json.dumps(doc) and "[redacted]" in doc["steps"][1]["message"]


HARBOR = {
    "schema_version": "ATIF-v1.5", "session_id": "9f1c", "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "gpt-5"},
    "steps": [
        {"step_id": 1, "timestamp": "2025-10-16T14:30:00Z", "source": "system", "message": "You are an agent."},
        {"step_id": 2, "timestamp": "2025-10-16T14:30:01Z", "source": "user", "message": "Create hello.txt"},
        {"step_id": 3, "timestamp": "2025-10-16T14:30:05Z", "source": "agent", "message": "I will create the file.",
         "reasoning_content": "simple", "tool_calls": [{"tool_call_id": "call_0", "function_name": "bash_command",
                                                       "arguments": {"keystrokes": "echo hi > hello.txt\n"}}],
         "observation": {"results": [{"source_call_id": "call_0", "content": "$ echo hi > hello.txt"}]},
         "metrics": {"prompt_tokens": 520, "completion_tokens": 80, "cached_tokens": 200, "cost_usd": 0.0012}},
        {"step_id": 4, "timestamp": "2025-10-16T14:30:09Z", "source": "agent", "message": "The task is complete.",
         "metrics": {"prompt_tokens": 610, "completion_tokens": 12}},
    ],
    "final_metrics": {"total_prompt_tokens": 1130, "total_completion_tokens": 92, "total_steps": 4},
}


def test_a_harbor_layout_becomes_trace_events_the_ingest_keeps():
    doc = Trajectory.model_validate(HARBOR)
    trace_id, steps, events = atif.import_events(doc, {"experiment_id": "exp_1", "scenario_id": None, "run_id": None})
    rows, errors = prepare_events({"events": events}, "atif")
    assert errors == [] and steps == 4 and {r["trace_id"] for _, r in rows} == {trace_id}
    kinds = [(r["event_type"], r["tool"]) for _, r in rows]
    assert kinds == [("span", "atif terminus-2"), ("span", "system message"), ("span", "user message"),
                     ("llm_call", "gpt-5"), ("tool_call", "bash_command"), ("llm_call", "gpt-5")]
    llm = rows[3][1]
    assert (llm["input"], llm["output"], llm["input_tokens"], llm["output_tokens"], llm["cached_tokens"]) == (
        "Create hello.txt", "I will create the file.", 520, 80, 200)
    assert rows[4][1]["output"] == "$ echo hi > hello.txt" and rows[5][1]["input"] == "$ echo hi > hello.txt"
    assert all(r["experiment_id"] == "exp_1" and r["agent"] == "terminus-2" for _, r in rows)


@pytest.mark.parametrize("change, loc", [
    (lambda d: d["steps"][2].__setitem__("step_id", "3"), "steps.2.step_id"),
    (lambda d: d["steps"][2]["tool_calls"][0].__setitem__("arguments", "echo"), "steps.2.tool_calls.0.arguments"),
    (lambda d: d["steps"][1].__setitem__("tool_calls", []), "steps.1"),
    (lambda d: d["steps"][3]["metrics"].__setitem__("prompt_tokens", -1), "steps.3.metrics.prompt_tokens"),
    (lambda d: d.__setitem__("schema_version", "v2"), "schema_version"),
    (lambda d: d["agent"].__setitem__("shell", "rm -rf /"), "agent.shell"),
    (lambda d: d["steps"][0].__setitem__("timestamp", "yesterday"), "steps.0.timestamp"),
])
def test_a_malformed_document_names_the_field(change, loc):
    data = json.loads(json.dumps(HARBOR))
    change(data)
    with pytest.raises(Exception) as caught:
        Trajectory.model_validate(data)
    assert loc in {".".join(str(p) for p in e["loc"]) for e in caught.value.errors()}


def test_media_and_subagent_paths_are_kept_as_text():
    data = json.loads(json.dumps(HARBOR))
    data["steps"][1]["message"] = [{"type": "text", "text": "look"},
                                   {"type": "image", "source": {"media_type": "image/png", "path": "/etc/shadow"}}]
    data["steps"][3]["observation"] = {"results": [{"subagent_trajectory_ref": [{"trajectory_path": "../../secret.json"}]},
                                                   {"subagent_trajectory_ref": [{"trajectory_id": "sub"}]}]}
    data["subagent_trajectories"] = [{"schema_version": "ATIF-v1.7", "trajectory_id": "sub", "agent": {"name": "helper", "version": "1"},
                                      "steps": [{"step_id": 1, "source": "agent", "message": "sub done"}]}]
    trace_id, steps, events = atif.import_events(Trajectory.model_validate(data), {})
    assert steps == 5
    assert events[2]["input"] == "look\n[image image/png /etc/shadow]"
    paths = [e["metadata"] for e in events if e.get("tool") == "subagent (not embedded)"]
    assert paths == [{"source": "atif", "trajectory_path": "../../secret.json", "followed": False}]
    assert [e["output"] for e in events if e.get("agent") == "helper" and e["event_type"] == "llm_call"] == ["sub done"]


def test_subagents_nested_too_deep_are_refused():
    doc: dict = {"schema_version": "ATIF-v1.8", "trajectory_id": "t0", "agent": {"name": "a", "version": "1"},
                 "steps": [{"step_id": 1, "source": "user", "message": "m"}]}
    for level in range(1, 6):
        doc = {**doc, "trajectory_id": f"t{level}", "subagent_trajectories": [doc]}
    with pytest.raises(atif.BodyError) as caught:
        atif.import_events(Trajectory.model_validate(doc), {})
    assert "subagent_trajectories" in caught.value.loc


def test_a_replayed_run_is_written_from_the_gateways_spans():
    answer = {"choices": [{"message": {"role": "assistant", "content": "checking", "tool_calls": []}}]}
    request = [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "call_7", "content": "42 files"}]
    spans = [
        {"span_id": "gw_1", "event_type": "llm_call", "source": "gateway", "started_at": "2026-01-01T00:00:01.000000Z",
         "input": "[]", "output": json.dumps(answer), "cost": {"model": "gpt-4o-mini", "input_tokens": 5, "output_tokens": 1}},
        {"span_id": "tu_1", "parent_span_id": "gw_1", "event_type": "tool_use", "source": "gateway", "tool": "ls",
         "input": "{}", "metadata": {"call_id": "call_7", "source": "gateway"}},
        {"span_id": "gw_2", "event_type": "llm_call", "source": "gateway", "started_at": "2026-01-01T00:00:02.000000Z",
         "input": json.dumps(request), "output": 'data: {"choices": [{"delta": {"content": "42"}}]}\n\ndata: [DONE]\n\n'},
    ]
    doc = Reference.model_validate(atif.build(RUN, {"prompt": "go"}, None, [], spans))
    asked, answered = doc.steps[1], doc.steps[2]
    assert asked.message == "checking" and [(r.source_call_id, r.content) for r in asked.observation.results] == [("call_7", "42 files")]
    assert answered.message == "42"


def test_an_agents_overlong_ids_and_names_still_make_a_valid_document():
    spans = [
        {"span_id": "s1", "event_type": "llm_call", "started_at": "2026-01-01T00:00:01.000000Z", "output": "x",
         "cost": {"model": "m" * 2000}, "source": "sandbox"},
        {"span_id": "s2", "parent_span_id": "s1", "event_type": "tool_use", "tool": "t" * 200, "input": "[1, 2]",
         "metadata": {"call_id": "c" * 5000}, "source": "sandbox"},
        {"span_id": "s3", "event_type": "tool_call", "tool": "t" * 200, "output": "y" * 100_000, "source": "sandbox",
         "started_at": "2026-01-01T00:00:02.000000Z"},
    ]
    doc = atif.build(RUN, None, None, [], spans)
    Trajectory.model_validate(doc)
    step = Reference.model_validate(doc).steps[0]
    assert step.tool_calls[0].arguments == {"input": [1, 2]} and step.observation.results[0].source_call_id == "c" * 512
    assert len(step.observation.results[0].content.encode()) <= atif.TEXT_LIMIT
