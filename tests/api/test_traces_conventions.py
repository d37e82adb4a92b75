"""Every GenAI convention in use, from the real instrumentation packages driving the real `openai`
SDK against a local fake provider, lands as the same svc events: the same three model calls give
the same `llm_call` models, tokens and costs whether they came from OpenInference (the OpenAI
instrumentation, and the OpenAI Agents SDK's), OpenLLMetry (current, and the older attribute names),
or svc's own tracing SDK. The mapping is daemon/traces/conventions.py (table:
docs/traces-conventions.md)."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from client import tracing
from tests.support.conventions import (
    FAILING_MODEL,
    FINAL_TURN,
    MODEL,
    SERVED_MODEL,
    STREAM_TURN,
    TOOL,
    TOOL_TURN,
    ConventionProvider,
    SpanCapture,
    three_chat_calls,
    turn_usd,
)

openai = pytest.importorskip("openai")

EXPECTED = sorted((SERVED_MODEL, inp, out, cached, round(turn_usd((inp, out, cached, r)), 10))
                  for inp, out, cached, r in (TOOL_TURN, FINAL_TURN, STREAM_TURN))


@pytest.fixture(scope="module")
def provider():
    with ConventionProvider() as server:
        yield server


def _client(provider: ConventionProvider) -> Any:
    return openai.OpenAI(base_url=provider.url, api_key="sk-convention-test-0123456789", max_retries=0)


def openinference_openai(capture: SpanCapture, provider: ConventionProvider) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=capture.provider)
    try:
        three_chat_calls(_client(provider))
    finally:
        instrumentor.uninstrument()


def openllmetry(capture: SpanCapture, provider: ConventionProvider) -> None:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=capture.provider)
    try:
        three_chat_calls(_client(provider))
    finally:
        instrumentor.uninstrument()


def openllmetry_legacy(capture: SpanCapture, provider: ConventionProvider) -> None:
    """OpenLLMetry before the GenAI conventions settled: the keys opentelemetry-instrumentation-openai
    0.40 writes (`llm.request.type`, `gen_ai.usage.prompt_tokens`, `gen_ai.usage.cache_read_input_tokens`,
    `gen_ai.completion.<i>.tool_calls.<j>.*`), by the real OpenTelemetry SDK around real calls, from
    the real replies, inside a traceloop agent span, with a traceloop tool span. That version cannot be
    installed beside the current one, and it records no usage for a stream, so its keys are written here."""
    tracer = capture.provider.get_tracer("opentelemetry.instrumentation.openai.v1", "0.26.0")
    client = _client(provider)
    original = client.chat.completions.create
    spans: list[Any] = []

    def traced(**kwargs: Any) -> Any:
        span = tracer.start_span("openai.chat", attributes={
            "llm.request.type": "chat", "gen_ai.system": "OpenAI", "gen_ai.request.model": kwargs["model"],
            "llm.is_streaming": bool(kwargs.get("stream")), "gen_ai.prompt.0.role": "user"})
        spans.append(span)
        reply = original(**kwargs)
        if kwargs.get("stream"):
            reply = list(reply)
            usage, model = reply[-1].usage, reply[-1].model
        else:
            usage, model = reply.usage, reply.model
            for i, call in enumerate(reply.choices[0].message.tool_calls or []):
                span.set_attribute(f"gen_ai.completion.0.tool_calls.{i}.id", call.id)
                span.set_attribute(f"gen_ai.completion.0.tool_calls.{i}.name", call.function.name)
        span.set_attributes({
            "gen_ai.response.model": model, "gen_ai.usage.prompt_tokens": usage.prompt_tokens,
            "gen_ai.usage.completion_tokens": usage.completion_tokens, "llm.usage.total_tokens": usage.total_tokens,
            "gen_ai.usage.cache_read_input_tokens": usage.prompt_tokens_details.cached_tokens})
        span.end()
        return iter(reply) if kwargs.get("stream") else reply

    client.chat.completions.create = traced
    # the Traceloop SDK's @agent and @tool decorators: traceloop.span.kind and traceloop.entity.*
    with tracer.start_as_current_span("weather-bot.agent", attributes={"traceloop.span.kind": "agent",
                                                                       "traceloop.entity.name": "weather-bot"}):
        three_chat_calls(client)
        with tracer.start_as_current_span("get_weather.tool", attributes={
                "traceloop.span.kind": "tool", "traceloop.entity.name": TOOL, "traceloop.entity.input": '{"city": "Paris"}',
                "traceloop.entity.output": "sunny"}):
            pass
    assert len(spans) == 3


def openai_agents(capture: SpanCapture, provider: ConventionProvider) -> None:
    """The OpenAI Agents SDK (Responses API model) traced by OpenInference's Agents instrumentation:
    an agent that calls a tool (two model calls), then a streamed run (the third)."""
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=capture.provider)  # exclusive: nothing goes to OpenAI's backend

    @function_tool(name_override=TOOL)
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return "sunny"

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=provider.url, api_key="sk-convention-test-0123456789", max_retries=0)
        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        weather = Agent(name="weather-bot", instructions="Be brief.", tools=[get_weather], model=model)
        assert (await Runner.run(weather, "What is the weather in Paris?")).final_output == "Sunny in Paris."
        streamed = Runner.run_streamed(Agent(name="streamer", instructions="Be brief.", model=model), "Hi")
        async for _ in streamed.stream_events():
            pass

    try:
        asyncio.run(run())
    finally:
        instrumentor.uninstrument()


def svc_sdk(base_url: str, key: str, provider: ConventionProvider) -> None:
    tracing.configure(base_url=base_url, api_key=key, env={})
    try:
        three_chat_calls(tracing.wrap_openai(_client(provider)))
        assert tracing.flush(10)
    finally:
        tracing.configure(env={})


def failing_call(instrumentation: str) -> Any:
    """One chat call the provider answers 500, under an instrumentation."""
    def run(capture: SpanCapture, provider: ConventionProvider) -> None:
        if instrumentation == "openinference":
            from openinference.instrumentation.openai import OpenAIInstrumentor
        else:
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=capture.provider)
        try:
            with pytest.raises(openai.InternalServerError):
                _client(provider).chat.completions.create(model=FAILING_MODEL, messages=[{"role": "user", "content": "Hi"}])
        finally:
            instrumentor.uninstrument()

    return run


OTLP_CLIENTS = {"openinference": openinference_openai, "openllmetry": openllmetry, "openllmetry-legacy": openllmetry_legacy,
                "openai-agents": openai_agents, "openinference-error": failing_call("openinference"),
                "openllmetry-error": failing_call("openllmetry")}
CLIENTS = ["openinference", "openllmetry", "openllmetry-legacy", "openai-agents", "svc-sdk"]


@pytest.fixture(scope="module")
def exports(provider):
    """Each instrumentation's export of the three calls, made once per module (the packages patch
    the openai SDK globally, and the agents run takes seconds) and posted to each test's daemon."""
    bodies: dict[str, bytes] = {}

    def body(name: str) -> bytes:
        if name not in bodies:
            capture = SpanCapture()
            OTLP_CLIENTS[name](capture, provider)
            bodies[name] = capture.body()
        return bodies[name]

    return body


async def export(api: Any, provider: ConventionProvider, exports: Any, name: str) -> None:
    if name == "svc-sdk":
        await asyncio.to_thread(svc_sdk, str(api.client.make_url("")).rstrip("/"), api.key, provider)
        return
    body = await asyncio.to_thread(exports, name)
    response = await api.client.post("/otel/v1/traces", data=body,
                                     headers=api.headers(None, {"Content-Type": "application/x-protobuf"}))
    assert response.status == 200, await response.text()


async def llm_calls(api: Any) -> list[dict[str, Any]]:
    response, page = await api.get("/v1/spans?event_type=llm_call&limit=100")
    assert response.status == 200, page
    return page["items"]


@pytest.mark.parametrize("name", CLIENTS)
async def test_the_same_three_calls_give_the_same_llm_calls(api, provider, exports, name):
    await export(api, provider, exports, name)
    calls = await llm_calls(api)
    got = sorted((c["cost"]["model"], c["cost"]["input_tokens"], c["cost"]["output_tokens"], c["cost"].get("cached_tokens"),
                  c["cost"]["estimated_usd"]) for c in calls)
    assert got == EXPECTED


@pytest.mark.parametrize("name", ["openinference", "openllmetry", "openai-agents", "svc-sdk"])
async def test_reasoning_tokens_are_kept(api, provider, exports, name):
    await export(api, provider, exports, name)
    reasoning = {c["cost"]["input_tokens"]: c["cost"].get("reasoning_tokens") for c in await llm_calls(api)}
    assert reasoning[FINAL_TURN[0]] == FINAL_TURN[3]


@pytest.mark.parametrize("name", ["openinference", "openllmetry", "openllmetry-legacy", "openai-agents"])
async def test_the_tool_a_model_call_asked_for_is_named(api, provider, exports, name):
    await export(api, provider, exports, name)
    asked = {c["cost"]["input_tokens"]: c["metadata"].get("svc.tool_calls") for c in await llm_calls(api)}
    assert asked[TOOL_TURN[0]] == [{"id": "call_1", "name": TOOL}]


@pytest.mark.parametrize("name", ["openai-agents", "openllmetry-legacy"])
async def test_the_tool_run_is_a_tool_call_of_its_agent(api, provider, exports, name):
    await export(api, provider, exports, name)
    _, page = await api.get("/v1/spans?event_type=tool_call")
    assert [(s["tool"], s["agent"], s["input"], s["output"]) for s in page["items"]] == [
        (TOOL, "weather-bot", '{"city": "Paris"}', "sunny")]


async def test_the_agents_sdk_model_calls_carry_their_agent_name(api, provider, exports):
    await export(api, provider, exports, "openai-agents")
    assert sorted(c["agent"] for c in await llm_calls(api)) == ["streamer", "weather-bot", "weather-bot"]


async def test_the_traceloop_agent_names_its_model_calls(api, provider, exports):
    await export(api, provider, exports, "openllmetry-legacy")
    assert [c["agent"] for c in await llm_calls(api)] == ["weather-bot"] * 3


@pytest.mark.parametrize("name", ["openinference-error", "openllmetry-error"])
async def test_a_failed_model_call_is_an_llm_call_in_error(api, provider, exports, name):
    await export(api, provider, exports, name)
    calls = await llm_calls(api)
    assert [(c["status"], c["error_type"], c["cost"]["estimated_usd"]) for c in calls] == [("error", "InternalServerError", None)]
