"""wrap_openai / wrap_anthropic with the real `openai` and `anthropic` libraries against a local
aiohttp server speaking their wire formats (plain and streaming), sync and async clients."""
from __future__ import annotations

import asyncio
import json

import pytest

from client import tracing
from tests.support.tracing import Collector

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

@pytest.fixture
def collector():
    c = Collector()
    tracing.configure(base_url=c.url, api_key="svc_live_wrappers", env={})
    yield c
    tracing.configure(env={})
    c.close()


async def flushed(collector: Collector) -> list[dict]:
    assert await asyncio.to_thread(tracing.flush, 10)
    return collector.events


def agent_turn(client, tools=True):
    """One agent step: the model asks for tools, the agent runs them, the model answers."""
    with tracing.span("agent") as root:
        reply = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "weather?"}],
            tools=[{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},
                   {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
            extra_headers={"Authorization": "Bearer should-not-be-traced"},
        )
        calls = reply.choices[0].message.tool_calls
        with tracing.tool_call(calls[0].function.name, calls[0].function.arguments, tool_call_id=calls[0].id) as t:
            t.set_output("sunny")
        tracing.record_tool_call(calls[1].function.name, calls[1].function.arguments, "contents", tool_call_id=calls[1].id)
        root.set_output("ok")
    return reply


def check_tree(events: list[dict], model: str = "gpt-4o-2024-08-06") -> None:
    by_type: dict[str, list[dict]] = {}
    for e in events:
        by_type.setdefault(e["event_type"], []).append(e)
    root = next(e for e in by_type["span"] if e["phase"] == "start")
    (llm,) = by_type["llm_call"]
    assert llm["phase"] == "complete" and llm["parent_span_id"] == root["span_id"] and llm["status"] == "ok"
    assert llm["cost"] == {"model": model, "input_tokens": 120, "output_tokens": 30, "cached_tokens": 20}
    assert llm["duration_ms"] > 0 and llm["tool"] == "openai.chat.completions.create"
    assert llm["metadata"]["provider"] == "openai" and llm["metadata"]["tools"] == ["search", "read_file"]
    assert json.loads(llm["input"])["messages"] == [{"role": "user", "content": "weather?"}]
    assert [c["name"] for c in json.loads(llm["output"])["tool_calls"]] == ["search", "read_file"]
    uses = by_type["tool_use"]
    assert [(u["tool"], u["phase"], u["parent_span_id"]) for u in uses] == [("search", "invoked", llm["span_id"]), ("read_file", "invoked", llm["span_id"])]
    assert json.loads(uses[0]["input"]) == {"q": "weather"} and uses[0]["metadata"] == {"tool_call_id": "call_1"}
    calls = by_type["tool_call"]
    search = [c for c in calls if c["tool"] == "search"]
    assert [c["phase"] for c in search] == ["start", "end"] and search[1]["output"] == "sunny"
    assert {c["parent_span_id"] for c in calls} == {llm["span_id"]}
    assert search[0]["metadata"]["tool_use_span_id"] == uses[0]["span_id"]
    read = next(c for c in calls if c["tool"] == "read_file")
    assert read["phase"] == "complete" and read["metadata"] == {"tool_use_span_id": uses[1]["span_id"], "tool_call_id": "call_2"}
    assert {e["trace_id"] for e in events} == {root["trace_id"]}
    assert "should-not-be-traced" not in json.dumps(events)


async def test_openai_sync_client(provider, collector):
    client = tracing.wrap_openai(openai.OpenAI(base_url=provider.url + "/v1", api_key="sk-test-secret-key-123456", max_retries=0))
    assert tracing.wrap_openai(client) is client  # idempotent
    await asyncio.to_thread(agent_turn, client)
    events = await flushed(collector)
    check_tree(events)
    assert provider.seen[0]["headers"]["Authorization"] == "Bearer should-not-be-traced"
    assert "sk-test-secret" not in json.dumps(events)


async def test_openai_async_client(provider, collector):
    client = tracing.wrap_openai(openai.AsyncOpenAI(base_url=provider.url + "/v1", api_key="sk-test", max_retries=0))

    @tracing.trace("agent")
    async def agent():
        reply = await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "weather?"}],
                                                     tools=[{"type": "function", "function": {"name": "search"}},
                                                            {"type": "function", "function": {"name": "read_file"}}])
        for call in reply.choices[0].message.tool_calls:
            async with tracing.tool_call(call.function.name, call.function.arguments, tool_call_id=call.id) as t:
                t.set_output("r")
        return "ok"

    assert await agent() == "ok"
    events = await flushed(collector)
    (llm,) = [e for e in events if e["event_type"] == "llm_call"]
    agent_start = next(e for e in events if e["tool"] == "agent")
    assert llm["parent_span_id"] == agent_start["span_id"] and llm["cost"]["input_tokens"] == 120
    calls = [e for e in events if e["event_type"] == "tool_call" and e["phase"] == "start"]
    assert [c["tool"] for c in calls] == ["search", "read_file"] and {c["parent_span_id"] for c in calls} == {llm["span_id"]}


async def test_openai_streaming(provider, collector):
    client = tracing.wrap_openai(openai.OpenAI(base_url=provider.url + "/v1", api_key="sk-test", max_retries=0))

    def consume():
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
                                                stream_options={"include_usage": True})
        return [chunk for chunk in stream]

    chunks = await asyncio.to_thread(consume)
    assert len(chunks) == 5
    aclient = tracing.wrap_openai(openai.AsyncOpenAI(base_url=provider.url + "/v1", api_key="sk-test", max_retries=0))
    stream = await aclient.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert len([c async for c in stream]) == 5
    events = await flushed(collector)
    llms = [e for e in events if e["event_type"] == "llm_call"]
    assert len(llms) == 2
    for llm in llms:
        assert llm["cost"] == {"model": "gpt-4o-mini", "input_tokens": 50, "output_tokens": 9, "cached_tokens": 0}
        assert json.loads(llm["output"]) == {"content": "Looking", "tool_calls": [{"id": "call_9", "name": "search", "arguments": '{"q": "x"}'}]}
        assert llm["metadata"]["finish_reason"] == "tool_calls" and llm["metadata"]["stream"] is True
    uses = [e for e in events if e["event_type"] == "tool_use"]
    assert [(u["tool"], u["input"]) for u in uses] == [("search", '{"q": "x"}')] * 2


async def test_openai_error_is_recorded_and_reraised(provider, collector):
    client = tracing.wrap_openai(openai.OpenAI(base_url=provider.url + "/v1", api_key="sk-test", max_retries=0))
    with pytest.raises(openai.InternalServerError):
        await asyncio.to_thread(client.chat.completions.create, model="explode", messages=[{"role": "user", "content": "x"}])
    events = await flushed(collector)
    (llm,) = events
    assert llm["status"] == "error" and llm["error_type"] == "InternalServerError" and "boom" in llm["output"]
    assert llm["cost"] == {"model": "explode"}


async def test_anthropic_sync_async_and_stream(provider, collector):
    client = tracing.wrap_anthropic(anthropic.Anthropic(base_url=provider.url, api_key="sk-ant-test-secret-123456789", max_retries=0))

    def turn():
        with tracing.span("agent"):
            msg = client.messages.create(model="claude-3-5-sonnet-20241022", max_tokens=100, system="be brief",
                                         messages=[{"role": "user", "content": "weather?"}],
                                         tools=[{"name": "search", "input_schema": {"type": "object"}}])
            use = next(b for b in msg.content if b.type == "tool_use")
            with tracing.tool_call(use.name, use.input, tool_call_id=use.id) as t:
                t.set_output({"temp": 21})

    await asyncio.to_thread(turn)
    aclient = tracing.wrap_anthropic(anthropic.AsyncAnthropic(base_url=provider.url, api_key="sk-ant-test", max_retries=0))
    msg = await aclient.messages.create(model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert msg.stop_reason == "tool_use"
    stream = await aclient.messages.create(model="claude-opus-4-5-20251101", max_tokens=10, messages=[{"role": "user", "content": "x"}], stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    events = await flushed(collector)
    llms = [e for e in events if e["event_type"] == "llm_call"]
    assert [llm["cost"]["model"] for llm in llms] == ["claude-3-5-sonnet-20241022", "claude-haiku-4-5", "claude-opus-4-5-20251101"]
    # input_tokens counts cached prompt tokens too; cached_tokens is the cache-read part
    assert llms[0]["cost"] == {"model": "claude-3-5-sonnet-20241022", "input_tokens": 160, "output_tokens": 40, "cached_tokens": 60}
    assert llms[0]["tool"] == "anthropic.messages.create" and json.loads(llms[0]["input"])["system"] == "be brief"
    assert llms[0]["metadata"]["stop_reason"] == "tool_use" and llms[0]["metadata"]["tools"] == ["search"]
    # no prompt was read from the cache: 0 cached tokens, as the model gateway counts them (provider_wire)
    assert llms[2]["cost"] == {"model": "claude-opus-4-5-20251101", "input_tokens": 70, "output_tokens": 12, "cached_tokens": 0}
    assert json.loads(llms[2]["output"]) == {"content": "Hi", "tool_uses": [{"id": "toolu_9", "name": "grep", "input": '{"p": "x"}'}]}
    uses = [e for e in events if e["event_type"] == "tool_use"]
    assert [u["tool"] for u in uses] == ["search", "search", "grep"]
    call = next(e for e in events if e["event_type"] == "tool_call" and e["phase"] == "start")
    assert call["parent_span_id"] == llms[0]["span_id"] and call["metadata"]["tool_call_id"] == "toolu_1"
    assert "sk-ant-test-secret" not in json.dumps(events)
