"""OTLP/HTTP ingest: the real OpenTelemetry SDK and exporters (protobuf and JSON) against the
in-process daemon, plus hand-made bodies for compression, OTLP/JSON ids and malformed input."""
from __future__ import annotations

import asyncio
import base64
import gzip
import json
import zlib

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from daemon import auth
from tests.support.otlp import make_request, make_span, post_otlp
from tests.support.store import add_experiment, add_sandbox
from daemon.appkeys import DEFAULT_TENANT_ID, STORE

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def otel_spans(endpoint: str, key: str, kind: str, batch: bool) -> str:
    """Emit agent -> chat -> tool spans with the real SDK; returns the trace id as hex."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace import Status as OtelStatus
    from opentelemetry.trace import StatusCode

    headers = {"authorization": f"Bearer {key}"}
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    compression = Compression.Gzip if kind == "gzip" else Compression.NoCompression
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers, compression=compression, timeout=10)
    provider = TracerProvider(resource=Resource.create({"service.name": "test-agent", "svc.experiment_id": "exp-otel"}))
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("tests.otlp", "1.0")
    with tracer.start_as_current_span("agent run", attributes={"gen_ai.agent.name": "otel-bot"}) as root:
        with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 300, "http.request.header.authorization": "Bearer sekret-value-123",
        }):
            with tracer.start_as_current_span("execute_tool search", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}):
                pass
            with tracer.start_as_current_span("fetch", attributes={"tool.name": "fetch"}) as failing:
                failing.record_exception(ValueError("404 from upstream"))
                failing.set_status(OtelStatus(StatusCode.ERROR, "upstream failed"))
        trace_hex = format(root.get_span_context().trace_id, "032x")
    provider.force_flush()
    provider.shutdown()
    return trace_hex


# OTLP/JSON is covered below with bodies written to the OTLP/JSON spec: the official JSON exporter
# (0.66b*) pins packages that do not resolve together from a fresh install.
@pytest.mark.parametrize("kind,batch", [("gzip", False), ("gzip", True), ("plain", False), ("plain", True)])
async def test_real_otel_sdk_spans_come_back_as_a_tree(api, kind, batch):
    await add_experiment(api, "exp-otel")
    endpoint = str(api.client.make_url("/otel/v1/traces"))
    trace_hex = await asyncio.to_thread(otel_spans, endpoint, api.key, kind, batch)
    trace_id = f"trace-{trace_hex}"
    response, page = await api.get(f"/v1/spans?trace_id={trace_id}")
    assert response.status == 200 and page["count"] == 4, page
    spans = {s["tool"]: s for s in page["items"]}
    root, chat, search, fetch = spans["agent run"], spans["chat gpt-4o"], spans["search"], spans["fetch"]
    assert root["parent_span_id"] == "" and root["event_type"] == "span"
    assert chat["parent_span_id"] == root["span_id"] and chat["event_type"] == "llm_call"
    assert search["parent_span_id"] == chat["span_id"] and search["event_type"] == "tool_call"
    assert fetch["parent_span_id"] == chat["span_id"] and fetch["event_type"] == "tool_call"
    # children were exported before their parent (one by one, or in one batch); the root is filled in
    assert {s["root_span_id"] for s in page["items"]} == {root["span_id"]}
    assert chat["cost"]["model"] == "gpt-4o-2024-08-06" and chat["cost"]["priced_as"] == "gpt-4o"
    assert chat["cost"]["input_tokens"] == 1200 and chat["cost"]["output_tokens"] == 300
    assert chat["cost"]["estimated_usd"] == pytest.approx((1200 * 2.5 + 300 * 10) / 1e6)
    assert chat["metadata"]["gen_ai.request.model"] == "gpt-4o" and chat["metadata"]["otel.kind"] == "internal"
    assert chat["metadata"]["http.request.header.authorization"] == "[redacted]"
    assert chat["metadata"]["otel.resource"]["service.name"] == "test-agent"
    assert fetch["status"] == "error" and fetch["output"] == "upstream failed" and fetch["error_type"] == "ValueError"
    assert search["status"] == "ok" and search["duration_ms"] is not None
    assert {s["experiment_id"] for s in page["items"]} == {"exp-otel"}
    assert root["agent"] == "otel-bot"
    assert {s["source"] for s in page["items"]} == {"otlp"}
    _, detail = await api.get(f"/v1/traces/{trace_id}")
    assert [s["tool"] for s in detail["spans"]][:2] == ["agent run", "chat gpt-4o"]
    assert [s["depth"] for s in detail["spans"]] == [0, 1, 2, 2]


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate"])
async def test_protobuf_bodies_plain_gzip_and_deflate(api, encoding):
    request = make_request([make_span("00f067aa0ba902b7", name="root"), make_span("00f067aa0ba902b8", "00f067aa0ba902b7", gen_ai__tool__name="grep")])
    raw = request.SerializeToString()
    body = {None: raw, "gzip": gzip.compress(raw), "deflate": zlib.compress(raw)}[encoding]
    response, data = await post_otlp(api, body, "application/x-protobuf", encoding)
    assert response.status == 200 and response.content_type == "application/x-protobuf"
    reply = ExportTraceServiceResponse.FromString(data)
    assert not reply.HasField("partial_success")
    _, page = await api.get(f"/v1/spans?trace_id=trace-{TRACE.hex()}")
    grep = next(s for s in page["items"] if s["tool"] == "grep")
    assert grep["parent_span_id"] == "span_00f067aa0ba902b7" and grep["duration_ms"] == 250
    assert grep["started_at"] == "2023-11-14T22:13:20.000000Z"


async def test_otlp_json_with_hex_ids(api):
    body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "j"}}]},
                               "scopeSpans": [{"scope": {"name": "manual"}, "spans": [
        {"traceId": TRACE.hex(), "spanId": "1111111111111111", "name": "root", "kind": 2,
         "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000"},
        {"traceId": TRACE.hex(), "spanId": "2222222222222222", "parentSpanId": "1111111111111111", "name": "chat",
         "startTimeUnixNano": "1700000000100000000", "endTimeUnixNano": "1700000000600000000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                        {"key": "gen_ai.request.model", "value": {"stringValue": "claude-3-5-haiku-20241022"}},
                        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1000"}},
                        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 100}},
                        {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"boolValue": True}]}}}],
         "status": {"code": 2, "message": "rate limited"}},
    ]}]}]}
    response, data = await post_otlp(api, json.dumps(body).encode(), "application/json")
    assert response.status == 200 and response.content_type == "application/json"
    assert json.loads(data) == {}
    _, page = await api.get("/v1/spans?span_id=span_2222222222222222")
    chat = page["items"][0]
    assert chat["trace_id"] == f"trace-{TRACE.hex()}" and chat["parent_span_id"] == "span_1111111111111111"
    assert chat["event_type"] == "llm_call" and chat["status"] == "error" and chat["output"] == "rate limited"
    assert chat["cost"]["estimated_usd"] == pytest.approx((1000 * 0.8 + 100 * 4) / 1e6)
    assert chat["metadata"]["tags"] == ["a", True] and chat["root_span_id"] == "span_1111111111111111"
    _, page = await api.get("/v1/spans?span_id=span_1111111111111111")
    assert page["items"][0]["metadata"]["otel.kind"] == "server" and page["items"][0]["metadata"]["otel.scope"] == "manual"


async def test_partial_success_in_the_request_content_type(api):
    good = make_span("3333333333333333", name="good")
    bad = Span(trace_id=b"\x01\x02", span_id=bytes.fromhex("4444444444444444"), name="short trace id")
    zero = Span(trace_id=TRACE, span_id=b"\x00" * 8, name="zero span id")
    request = make_request([good, bad, zero])
    response, data = await post_otlp(api, request.SerializeToString(), "application/x-protobuf")
    reply = ExportTraceServiceResponse.FromString(data)
    assert response.status == 200 and reply.partial_success.rejected_spans == 2
    assert "span 1" in reply.partial_success.error_message and "trace_id" in reply.partial_success.error_message
    as_json = json_format.MessageToDict(request)
    for span in as_json["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["traceId"] = base64.b64decode(span["traceId"]).hex()
        span["spanId"] = base64.b64decode(span["spanId"]).hex()
    response, data = await post_otlp(api, json.dumps(as_json).encode(), "application/json")
    reply = json.loads(data)
    assert response.status == 200 and reply["partialSuccess"]["rejectedSpans"] == "2"
    _, page = await api.get("/v1/spans?span_id=span_3333333333333333")
    assert page["count"] == 1  # the good span was stored (twice posted, listed once)


async def test_malformed_otlp_bodies_are_400_with_a_reason(api):
    cases = [
        (b"\xff\xff\xff\xff not protobuf", "application/x-protobuf", None, "protobuf"),
        (b"{not json", "application/json", None, "OTLP/JSON"),
        (b'["a list"]', "application/json", None, "resourceSpans"),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "11"}]}]}]}).encode(),
         "application/json", None, "hex"),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5, "kind": "NOPE"}]}]}]}).encode(), "application/json", None, "malformed"),
        (b"", "application/x-protobuf", None, "empty"),
    ]
    for body, content_type, encoding, needle in cases:
        response, data = await post_otlp(api, body, content_type, encoding)
        reply = json.loads(data)
        assert response.status == 400 and reply["error"] == "invalid_request", (body, reply)
        assert needle in reply["message"], (needle, reply["message"])
    response, data = await post_otlp(api, b"not gzip at all", "application/x-protobuf", "gzip")
    assert response.status == 400
    response, data = await post_otlp(api, b"x", "text/plain")
    assert response.status == 415
    response = await api.client.post("/otel/v1/traces", data=b"", headers={"Content-Type": "application/x-protobuf"})
    assert response.status == 401


async def test_otlp_to_a_sandbox_trace_endpoint_with_its_token(api):
    await add_sandbox(api, "sbx_otel")
    token = await auth.create_sandbox_token(api.app[STORE], api.app[DEFAULT_TENANT_ID], "sbx_otel")
    request = make_request([make_span("5555555555555555", name="in sandbox")])
    response, data = await post_otlp(api, gzip.compress(request.SerializeToString()), "application/x-protobuf", "gzip",
                                     path="/v1/sandboxes/sbx_otel/trace", key=token)
    assert response.status == 200 and ExportTraceServiceResponse.FromString(data) == ExportTraceServiceResponse()
    _, page = await api.get("/v1/sandboxes/sbx_otel/trace")
    assert page["count"] == 1 and page["items"][0]["sandbox_id"] == "sbx_otel" and page["items"][0]["source"] == "otlp"
    response, _ = await post_otlp(api, request.SerializeToString(), "application/x-protobuf", key=token)
    assert response.status == 403  # a sandbox token posts only to its own sandbox's trace endpoint
