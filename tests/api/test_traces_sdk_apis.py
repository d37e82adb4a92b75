"""The tracing SDK's wrappers around what the provider SDKs offer besides chat completions: the
OpenAI Responses API (plain, streamed, the `responses.stream()` helper), Anthropic's
`messages.stream()` (sync and async), and a stream that reports no usage (tokens and cost unknown,
never 0). The real `openai` and `anthropic` SDKs talk to a local fake provider; the SDK posts to the
in-process daemon."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from client import tracing
from tests.support.conventions import CLAUDE, MODEL, SERVED_MODEL, STREAM_TURN, TOOL, TOOL_TURN, TOOLS, ConventionProvider

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
RESPONSES_TOOLS = [{"type": "function", "name": TOOL, "parameters": TOOLS[0]["function"]["parameters"]}]


@pytest.fixture(scope="module")
def provider():
    with ConventionProvider() as server:
        yield server


@pytest.fixture(autouse=True)
def usage_on(provider):
    provider.usage = True
    yield
    provider.usage = True


async def traced(api: Any, work: Callable[[], Any]) -> list[dict[str, Any]]:
    """Run `work` with the SDK tracing to the daemon; the llm_call spans it recorded."""
    def run() -> None:
        tracing.configure(base_url=str(api.client.make_url("")).rstrip("/"), api_key=api.key, env={})
        try:
            work()
            assert tracing.flush(10)
        finally:
            tracing.configure(env={})

    await asyncio.to_thread(run)
    _, page = await api.get("/v1/spans?event_type=llm_call")
    return page["items"]


def cost_of(span: dict[str, Any]) -> tuple:
    cost = span["cost"]
    return cost["model"], cost["input_tokens"], cost["output_tokens"], cost.get("cached_tokens")


def openai_client(provider: ConventionProvider) -> Any:
    return tracing.wrap_openai(openai.OpenAI(base_url=provider.url, api_key="sk-sdk-test-0123456789abcdef", max_retries=0))


def anthropic_client(provider: ConventionProvider, cls: Any = None) -> Any:
    cls = cls or anthropic.Anthropic
    return tracing.wrap_anthropic(cls(base_url=provider.root, api_key="sk-ant-sdk-test-0123456789abcdef", max_retries=0))


async def test_responses_create_is_an_llm_call_with_its_usage(api, provider):
    calls = await traced(api, lambda: openai_client(provider).responses.create(model=MODEL, input="Weather?", tools=RESPONSES_TOOLS))
    assert [cost_of(c) for c in calls] == [(SERVED_MODEL, TOOL_TURN[0], TOOL_TURN[1], TOOL_TURN[2])]


async def test_responses_create_asks_for_its_function_calls_as_tool_uses(api, provider):
    await traced(api, lambda: openai_client(provider).responses.create(model=MODEL, input="Weather?", tools=RESPONSES_TOOLS))
    _, page = await api.get("/v1/spans?event_type=tool_use")
    assert [(s["tool"], s["input"], s["metadata"]["tool_call_id"]) for s in page["items"]] == [(TOOL, '{"city": "Paris"}', "call_1")]


async def test_responses_create_streamed_is_recorded_when_consumed(api, provider):
    calls = await traced(api, lambda: list(openai_client(provider).responses.create(model=MODEL, input="Hi", stream=True)))
    assert [cost_of(c) for c in calls] == [(SERVED_MODEL, STREAM_TURN[0], STREAM_TURN[1], STREAM_TURN[2])]


async def test_responses_stream_helper_is_recorded_when_its_block_exits(api, provider):
    def work() -> None:
        with openai_client(provider).responses.stream(model=MODEL, input="Hi") as stream:
            for _ in stream:
                pass

    calls = await traced(api, work)
    assert [(cost_of(c), c["output"]) for c in calls] == [((SERVED_MODEL, STREAM_TURN[0], STREAM_TURN[1], STREAM_TURN[2]), "Streamed answer.")]


async def test_anthropic_messages_stream_sync(api, provider):
    def work() -> None:
        with anthropic_client(provider).messages.stream(model=CLAUDE, max_tokens=100, messages=[{"role": "user", "content": "Hi"}]) as stream:
            assert "".join(stream.text_stream) == "Streamed answer."

    calls = await traced(api, work)
    assert [(cost_of(c), c["output"]) for c in calls] == [((CLAUDE, STREAM_TURN[0], STREAM_TURN[1], STREAM_TURN[2]), "Streamed answer.")]


async def test_anthropic_messages_stream_async(api, provider):
    async def use() -> None:
        client = anthropic_client(provider, anthropic.AsyncAnthropic)
        async with client.messages.stream(model=CLAUDE, max_tokens=100, messages=[{"role": "user", "content": "Hi"}]) as stream:
            message = await stream.get_final_message()
            assert message.content[0].text == "Streamed answer."

    calls = await traced(api, lambda: asyncio.run(use()))
    assert [cost_of(c) for c in calls] == [(CLAUDE, STREAM_TURN[0], STREAM_TURN[1], STREAM_TURN[2])]


async def test_a_stream_without_usage_has_unknown_tokens_and_cost(api, provider):
    def work() -> None:
        list(openai_client(provider).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True))

    (call,) = await traced(api, work)
    assert call["cost"] == {"model": SERVED_MODEL, "input_tokens": None, "output_tokens": None, "estimated_usd": None,
                            "unpriced": True, "unpriced_reason": "no token counts"}


async def test_summed_costs_count_the_unpriced_calls(api, provider):
    def work() -> None:
        client = openai_client(provider)
        with tracing.span("agent"):
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}])
            list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], stream=True))

    (call, _) = await traced(api, work)
    _, detail = await api.get(f"/v1/traces/{call['trace_id']}")
    assert (detail["unpriced_calls"], detail["total_cost_usd"]) == (1, pytest.approx(priced_usd(detail)))


def priced_usd(detail: dict[str, Any]) -> float:
    return sum(s["cost"]["estimated_usd"] for s in detail["spans"] if s["cost"] and s["cost"]["estimated_usd"] is not None)
