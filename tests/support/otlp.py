"""Raw OTLP requests for the trace ingest tests: spans built by hand and posted as the exporters do."""
from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def make_request(spans: list[Span]) -> ExportTraceServiceRequest:
    resource = ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])
    resource.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="raw")))
    return ExportTraceServiceRequest(resource_spans=[resource])


def make_span(span_hex: str, parent_hex: str = "", name: str = "op", **attrs) -> Span:
    span = Span(trace_id=TRACE, span_id=bytes.fromhex(span_hex), name=name,
                start_time_unix_nano=1_700_000_000_000_000_000, end_time_unix_nano=1_700_000_000_250_000_000)
    if parent_hex:
        span.parent_span_id = bytes.fromhex(parent_hex)
    for key, value in attrs.items():
        any_value = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=str(value))
        span.attributes.append(KeyValue(key=key.replace("__", "."), value=any_value))
    return span


async def post_otlp(api, body: bytes, content_type: str, encoding: str | None = None, path: str = "/otel/v1/traces", key=None):
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    response = await api.client.post(path, data=body, headers=api.headers(key, headers))
    return response, await response.read()
