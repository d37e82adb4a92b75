"""Trace events filed under an experiment: an agent's own OTLP export stamped with
`svc.experiment_id` counts in that experiment's cost, and an experiment id that does not exist is
refused (OTLP: per span, in partial_success; JSON events: the request, naming the event)."""
from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.support.otlp import make_request, make_span, post_otlp
from tests.support.experiments import run_experiment, start, upload
from tests.support.specs import spec_yaml


@pytest.fixture
async def experiments_api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


def chat_span(span_hex: str, experiment_id: str | None):
    attrs = {"gen_ai__operation__name": "chat", "gen_ai__request__model": "gpt-4o-mini",
             "gen_ai__usage__input_tokens": 1_000_000, "gen_ai__usage__output_tokens": 0}
    if experiment_id:
        attrs["svc__experiment_id"] = experiment_id
    return make_span(span_hex, name="chat", **attrs)


async def test_otlp_spans_stamped_with_an_experiment_count_in_its_cost(experiments_api):
    api = experiments_api
    await upload(api, spec_yaml())
    experiment = await run_experiment(api, name="otel", spec_id="demo", replicas=1)
    _, before = await api.get(f"/v1/metrics/experiments/{experiment['id']}")
    response, _ = await post_otlp(api, make_request([chat_span("6666666666666661", experiment["id"])]).SerializeToString(),
                                  "application/x-protobuf")
    assert response.status == 200
    _, after = await api.get(f"/v1/metrics/experiments/{experiment['id']}")
    # gpt-4o-mini: 1M input tokens at 0.15 USD
    assert after["summary"]["total_cost_usd"] == pytest.approx(before["summary"]["total_cost_usd"] + 0.15)


async def test_an_unknown_experiment_on_otlp_is_reported_per_span(api):
    request = make_request([chat_span("7777777777777771", None), chat_span("7777777777777772", "exp_nope")])
    response, data = await post_otlp(api, request.SerializeToString(), "application/x-protobuf")
    reply = ExportTraceServiceResponse.FromString(data)
    _, page = await api.get("/v1/spans?event_type=llm_call")
    assert (response.status, reply.partial_success.rejected_spans, "span 1" in reply.partial_success.error_message,
            "experiment 'exp_nope' does not exist" in reply.partial_success.error_message, page["count"]) == (200, 1, True, True, 1)


async def test_an_unknown_experiment_on_otlp_json_is_reported_in_kind(api):
    as_json = json_format.MessageToDict(make_request([chat_span("7777777777777773", "exp_nope")]))
    for span in as_json["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["traceId"], span["spanId"] = "0af7651916cd43dd8448eb211c80319c", "7777777777777773"
    response, data = await post_otlp(api, json.dumps(as_json).encode(), "application/json")
    assert (response.status, json.loads(data)["partialSuccess"]["rejectedSpans"]) == (200, "1")


async def test_an_unknown_experiment_on_json_ingest_is_refused_naming_the_event(api):
    response, body = await api.post("/v1/traces", json={"events": [
        {"event_type": "tool_call", "tool": "ok"}, {"event_type": "tool_call", "tool": "t", "experiment_id": "exp_nope"}]})
    assert (response.status, body["message"].split(";")[0]) == (400, "events.1.experiment_id: experiment 'exp_nope' does not exist")
