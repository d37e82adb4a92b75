"""Trace ingest (JSON), storage rules and the query API."""
from __future__ import annotations

import asyncio
import json

from daemon import auth
from daemon.traces.models import TEXT_LIMIT_BYTES
from tests.support.store import add_experiment, add_sandbox
from daemon.appkeys import DEFAULT_TENANT_ID, EVENTS, STORE, TRACE_DB, TRACE_WRITER


async def tenant_of(api, key: str) -> str:
    principal = await auth.resolve_bearer(api.app[STORE], key)
    return principal.tenant_id


async def post_events(api, events, path="/v1/traces", **kw):
    response, body = await api.post(path, json={"events": events}, **kw)
    assert response.status == 202, body
    return body


async def test_ingest_keeps_good_events_and_reports_bad_ones_by_index(api):
    body = await post_events(api, [
        {"event_type": "tool_call", "tool": "search", "span_id": "span_a1"},
        {"event_type": "nope"},
        "not an object",
        {"event_type": "llm_call", "cost": {"input_tokens": -1}},
        {"event_type": "tool_call", "phase": "end"},
        {"event_type": "tool_call", "tool": "read", "surprise": 1},
        {"event_type": "tool_use", "phase": "invoked", "tool": "search", "parent_span_id": "span_a1"},
    ])
    assert body["accepted"] == 2 and body["rejected"] == 5
    by_index = {e["index"]: e for e in body["errors"]}
    assert sorted(by_index) == [1, 2, 3, 4, 5]
    assert by_index[1]["loc"] == "events.1.event_type"
    assert by_index[2]["loc"] == "events.2"
    assert by_index[3]["loc"] == "events.3.cost.input_tokens"
    assert by_index[4]["loc"] == "events.4.span_id" and "start" in by_index[4]["msg"]
    assert by_index[5]["loc"] == "events.5.surprise"
    assert len(body["trace_ids"]) == 1 and body["trace_ids"][0].startswith("trace-")
    response, page = await api.get("/v1/traces")
    assert page["count"] == 2
    tool_use = next(e for e in page["items"] if e["event_type"] == "tool_use")
    assert tool_use["trace_id"] == body["trace_ids"][0]
    assert tool_use["span_id"].startswith("span_") and tool_use["parent_span_id"] == "span_a1"


async def test_whole_body_errors_are_400(api):
    for payload in ({"event": []}, {"events": {}}, {"events": [], "extra": 1}):
        response, body = await api.post("/v1/traces", json=payload)
        assert response.status == 400 and body["error"] == "invalid_request", payload
    response, body = await api.post("/v1/traces", json=[{"event_type": "span"}])
    assert response.status == 400 and "{events" in body["message"]
    response, body = await api.post("/v1/traces", data=b"{nope", headers={"Content-Type": "application/json"})
    assert response.status == 400 and "malformed JSON" in body["message"]
    response, body = await api.post("/v1/traces", data=b"x", headers={"Content-Type": "text/plain"})
    assert response.status == 415
    response, body = await api.post("/v1/traces", json={"events": [{"event_type": "span"}] * 10_001})
    assert response.status == 400 and "10000" in body["message"] and "split" in body["message"]
    response, body = await api.post("/v1/traces", json={"events": []})
    assert response.status == 202 and body == {"accepted": 0, "rejected": 0, "errors": [], "trace_ids": []}


async def test_input_and_output_are_truncated_utf8_safe(api):
    long_ascii = "a" * 12_000
    long_utf8 = "é" * 5000  # 10,000 bytes
    await post_events(api, [{"event_type": "tool_call", "tool": "t", "input": long_ascii, "output": long_utf8}])
    _, page = await api.get("/v1/traces")
    event = page["items"][0]
    for text, total in ((event["input"], 12_000), (event["output"], 10_000)):
        raw = text.encode("utf-8")
        assert len(raw) <= TEXT_LIMIT_BYTES
        kept = text[: text.index("…[truncated")]
        dropped = total - len(kept.encode())
        assert text.endswith(f"…[truncated {dropped} bytes]")
    assert set(event["output"][: event["output"].index("…")]) == {"é"}
    await post_events(api, [{"event_type": "tool_call", "tool": "j", "input": {"q": "hi", "n": [1, 2]}}])
    _, page = await api.get("/v1/traces?tool=j")
    assert json.loads(page["items"][0]["input"]) == {"q": "hi", "n": [1, 2]}


async def test_secrets_never_reach_storage(api):
    await post_events(api, [{
        "event_type": "llm_call",
        "input": "curl -H 'Authorization: Bearer sk-live-abcdefghijklmnopqrstuvwxyz' with key svc_live_abcdefghijklmnopqrstuvwxyz12",
        "output": "used sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX",
        "metadata": {"headers": {"Authorization": "Bearer xyz123456789", "x-api-key": "k-123"}, "api_key": "plain",
                     "http.request.header.authorization": ["Basic Zm9vOmJhcg=="], "max_tokens": 10, "note": "fine"},
    }])
    response = await api.client.get("/v1/traces", headers=api.headers())
    text = await response.text()
    for secret in ("sk-live-abcdefghijklmnop", "svc_live_abcdefghijklmnopqrstuvwxyz12", "sk-proj-ABCDEF", "xyz123456789", "k-123", "plain", "Zm9vOmJhcg"):
        assert secret not in text, secret
    event = json.loads(text)["items"][0]
    assert event["metadata"]["max_tokens"] == 10 and event["metadata"]["note"] == "fine"
    assert event["metadata"]["headers"]["Authorization"] == "[redacted]"
    assert "Bearer [redacted]" in event["input"]


async def test_pricing_at_ingest(api):
    await post_events(api, [
        {"event_type": "llm_call", "tool": "a", "cost": {"model": "gpt-4o-2024-08-06", "input_tokens": 1_000_000, "output_tokens": 100_000, "cached_tokens": 200_000, "estimated_usd": 99}},
        {"event_type": "llm_call", "tool": "b", "cost": {"model": "my-local-llama", "input_tokens": 50, "output_tokens": 5}},
    ])
    _, page = await api.get("/v1/traces?event_type=llm_call&order=asc")
    priced, unpriced = (e["cost"] for e in page["items"])
    # 800k * 2.50 + 200k * 1.25 + 100k * 10.00 per 1M
    assert priced["estimated_usd"] == 2.0 + 0.25 + 1.0 and priced["priced_as"] == "gpt-4o" and "unpriced" not in priced
    assert unpriced == {"model": "my-local-llama", "input_tokens": 50, "output_tokens": 5, "estimated_usd": None, "unpriced": True,
                        "unpriced_reason": "model not in the pricing table"}


async def test_trace_membership_rules(api):
    # a root starts a trace; its child joins it; the end (no trace id) joins its start, in a later request
    first = await post_events(api, [
        {"event_type": "span", "phase": "start", "span_id": "span_root", "tool": "agent"},
        {"event_type": "tool_call", "phase": "start", "span_id": "span_c", "parent_span_id": "span_root", "tool": "x"},
    ])
    trace_id = first["trace_ids"][0]
    second = await post_events(api, [
        {"event_type": "tool_call", "phase": "end", "span_id": "span_c", "output": "done"},
        {"event_type": "tool_call", "span_id": "span_gc", "parent_span_id": "span_c", "tool": "y"},
        # a child listed before its parent in the same batch
        {"event_type": "tool_call", "span_id": "span_late_child", "parent_span_id": "span_late_parent", "tool": "z"},
        {"event_type": "span", "span_id": "span_late_parent", "parent_span_id": "span_root", "tool": "w"},
        {"event_type": "tool_call", "span_id": "span_orphan", "parent_span_id": "span_never_seen"},
        {"event_type": "span", "span_id": "span_explicit", "parent_span_id": "span_never_seen", "trace_id": "trace-mine"},
        {"event_type": "span", "phase": "end", "span_id": "span_root"},
    ])
    assert second["accepted"] == 6 and second["rejected"] == 1
    assert second["errors"][0]["index"] == 4 and second["errors"][0]["loc"] == "events.4.parent_span_id"
    assert "span_never_seen" in second["errors"][0]["msg"]
    assert second["trace_ids"] == [trace_id, "trace-mine"]
    response, detail = await api.get(f"/v1/traces/{trace_id}")
    assert response.status == 200
    ids = [s["span_id"] for s in detail["spans"]]
    assert set(ids) == {"span_root", "span_c", "span_gc", "span_late_parent", "span_late_child"}
    assert all(s["root_span_id"] == "span_root" for s in detail["spans"])
    _, spans = await api.get("/v1/spans?span_id=span_explicit")
    assert spans["items"][0]["trace_id"] == "trace-mine" and spans["items"][0]["root_span_id"] is None


async def test_trace_detail_is_a_tree_with_end_data_merged(api):
    events = [
        {"event_type": "span", "phase": "start", "span_id": "span_r", "tool": "agent", "ts": "2025-01-01T00:00:00Z", "input": "task"},
        {"event_type": "llm_call", "phase": "complete", "span_id": "span_l2", "parent_span_id": "span_r", "ts": "2025-01-01T00:00:05Z",
         "duration_ms": 100, "cost": {"model": "claude-3-5-sonnet-20241022", "input_tokens": 1000, "output_tokens": 100}},
        {"event_type": "llm_call", "phase": "complete", "span_id": "span_l1", "parent_span_id": "span_r", "ts": "2025-01-01T00:00:01Z",
         "duration_ms": 200, "cost": {"model": "claude-3-5-sonnet-20241022", "input_tokens": 2000, "output_tokens": 200}},
        {"event_type": "tool_use", "phase": "invoked", "span_id": "span_u", "parent_span_id": "span_l1", "tool": "search", "ts": "2025-01-01T00:00:01.200Z"},
        {"event_type": "tool_call", "phase": "start", "span_id": "span_t", "parent_span_id": "span_l1", "tool": "search", "ts": "2025-01-01T00:00:02Z", "input": "q"},
        {"event_type": "tool_call", "phase": "end", "span_id": "span_t", "ts": "2025-01-01T00:00:02.500Z", "status": "error",
         "error_type": "tool_error", "output": "timeout"},
        {"event_type": "span", "phase": "end", "span_id": "span_r", "ts": "2025-01-01T00:00:10Z", "output": {"answer": 42}, "duration_ms": 10000},
    ]
    trace_id = (await post_events(api, events))["trace_ids"][0]
    response, detail = await api.get(f"/v1/traces/{trace_id}")
    order = [(s["span_id"], s["depth"]) for s in detail["spans"]]
    assert order == [("span_r", 0), ("span_l1", 1), ("span_u", 2), ("span_t", 2), ("span_l2", 1)]
    root, l1, use, tool, l2 = detail["spans"]
    assert root["phases"] == ["start", "end"] and not root["open"]
    assert root["input"] == "task" and json.loads(root["output"]) == {"answer": 42} and root["duration_ms"] == 10000
    assert root["started_at"] == "2025-01-01T00:00:00.000000Z" and root["ended_at"] == "2025-01-01T00:00:10.000000Z"
    assert tool["status"] == "error" and tool["error_type"] == "tool_error" and tool["output"] == "timeout"
    assert tool["duration_ms"] == 500 and tool["input"] == "q" and tool["tool"] == "search"
    assert l1["ended_at"] == "2025-01-01T00:00:01.200000Z"
    assert detail["span_count"] == 5 and detail["event_count"] == 7 and detail["errors"] == 1
    assert detail["root_span_ids"] == ["span_r"] and detail["duration_ms"] == 10000
    assert detail["input_tokens"] == 3000 and detail["output_tokens"] == 300
    assert abs(detail["total_cost_usd"] - (3000 * 3 + 300 * 15) / 1e6) < 1e-9


async def test_trace_detail_404_for_unknown_and_for_another_tenants(api, other_tenant_key):
    response, body = await api.get("/v1/traces/trace-unknown")
    assert response.status == 404 and body["details"] == {"resource": "trace", "id": "trace-unknown"}
    trace_id = (await post_events(api, [{"event_type": "span", "tool": "mine"}]))["trace_ids"][0]
    response, body = await api.get(f"/v1/traces/{trace_id}", key=other_tenant_key)
    assert response.status == 404 and body["error"] == "not_found"  # as unknown as an id never seen
    _, page = await api.get("/v1/traces", key=other_tenant_key)
    assert page["count"] == 0
    _, page = await api.get(f"/v1/spans?trace_id={trace_id}", key=other_tenant_key)
    assert page["count"] == 0


async def test_list_filters_and_bad_values(api):
    for experiment_id in ("exp-1", "exp-2"):
        await add_experiment(api, experiment_id)
    await post_events(api, [
        {"event_type": "llm_call", "tool": "chat", "agent": "bot", "experiment_id": "exp-1", "run_id": "run_1", "ts": "2025-01-01T00:00:00Z"},
        {"event_type": "tool_call", "tool": "search", "agent": "bot", "experiment_id": "exp-1", "run_id": "run_2", "ts": "2025-02-01T00:00:00Z"},
        {"event_type": "tool_call", "tool": "write", "agent": "other", "experiment_id": "exp-2", "ts": "2025-03-01T00:00:00+02:00"},
    ])

    async def tools(query: str) -> list[str]:
        response, page = await api.get("/v1/traces?" + query)
        assert response.status == 200, page
        return sorted(e["tool"] for e in page["items"])

    assert await tools("experiment_id=exp-1") == ["chat", "search"]
    assert await tools("event_type=tool_call") == ["search", "write"]
    assert await tools("tool=search") == ["search"]
    assert await tools("agent=bot&event_type=llm_call") == ["chat"]
    assert await tools("run_id=run_2") == ["search"]
    assert await tools("since=2025-01-15T00:00:00Z") == ["search", "write"]
    assert await tools("since=2025-02-28T21:00:00Z") == ["write"]  # 00:00+02:00 is 22:00Z
    assert await tools("since=2025-02-28T23:00:00Z") == []
    assert await tools("since=2025-01-15T00:00:00Z&until=2025-02-15T00:00:00Z") == ["search"]
    assert await tools("sandbox_id=sbx_none") == []
    for query, loc in (("since=yesterday", "query.since"), ("event_type=thinking", "query.event_type"),
                       ("colour=red", "query.colour"), ("limit=0", "query.limit"), ("order=up", "query.order")):
        response, body = await api.get("/v1/traces?" + query)
        assert response.status == 400 and body["details"]["errors"][0]["loc"] == loc, (query, body)


async def test_spans_endpoint_merges_and_filters(api):
    events = [
        {"event_type": "span", "phase": "start", "span_id": "span_root1", "tool": "agent"},
        {"event_type": "llm_call", "span_id": "span_m", "parent_span_id": "span_root1", "duration_ms": 5},
        {"event_type": "tool_call", "phase": "start", "span_id": "span_t1", "parent_span_id": "span_m", "tool": "search"},
        {"event_type": "tool_call", "phase": "end", "span_id": "span_t1", "output": "r", "duration_ms": 7},
        {"event_type": "tool_call", "phase": "start", "span_id": "span_t2", "parent_span_id": "span_m", "tool": "fetch"},
    ]
    trace_id = (await post_events(api, events))["trace_ids"][0]
    _, page = await api.get(f"/v1/spans?trace_id={trace_id}")
    assert page["count"] == 4  # one item per span
    by_id = {s["span_id"]: s for s in page["items"]}
    assert by_id["span_t1"]["phases"] == ["start", "end"] and by_id["span_t1"]["output"] == "r" and by_id["span_t1"]["duration_ms"] == 7
    assert by_id["span_t2"]["open"] is True and by_id["span_root1"]["open"] is True
    _, page = await api.get("/v1/spans?parent_span_id=span_m")
    assert sorted(s["span_id"] for s in page["items"]) == ["span_t1", "span_t2"]
    _, page = await api.get("/v1/spans?root_span=span_root1&tool=search")
    assert [s["span_id"] for s in page["items"]] == ["span_t1"]
    _, page = await api.get("/v1/spans?root_span_id=span_root1&event_type=llm_call")
    assert [s["span_id"] for s in page["items"]] == ["span_m"]
    # the end of span_t2 arrives later; the span is still listed once
    await post_events(api, [{"event_type": "tool_call", "phase": "end", "span_id": "span_t2", "status": "error"}])
    _, page = await api.get(f"/v1/spans?trace_id={trace_id}&limit=2")
    seen = [s["span_id"] for s in page["items"]]
    _, page2 = await api.get(f"/v1/spans?trace_id={trace_id}&limit=2&cursor={page['next_cursor']}")
    seen += [s["span_id"] for s in page2["items"]]
    assert sorted(seen) == ["span_m", "span_root1", "span_t1", "span_t2"] and page2["next_cursor"] is None
    t2 = next(s for s in page["items"] + page2["items"] if s["span_id"] == "span_t2")
    assert t2["status"] == "error" and not t2["open"]


async def test_cursor_pagination_sees_every_event_once_while_ingest_continues(api):
    await post_events(api, [{"event_type": "tool_call", "tool": "t", "input": str(i)} for i in range(250)])
    seen: list[str] = []
    cursor = None
    writes = 0
    while True:
        response, page = await api.get("/v1/traces?limit=40" + (f"&cursor={cursor}" if cursor else ""))
        seen += [e["id"] for e in page["items"]]
        # more events arrive between pages
        await post_events(api, [{"event_type": "tool_call", "tool": "late"} for _ in range(15)])
        writes += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 250
    _, page = await api.get("/v1/traces?tool=t&limit=1000&order=asc")
    assert [e["input"] for e in page["items"]] == [str(i) for i in range(250)]
    assert writes == 7


async def test_ndjson_streams_every_match(api):
    await post_events(api, [{"event_type": "tool_call", "tool": "n", "input": str(i)} for i in range(2500)])
    await post_events(api, [{"event_type": "llm_call", "tool": "other"}])
    for kwargs in ({"path": "/v1/traces?tool=n&format=ndjson", "headers": {}},
                   {"path": "/v1/traces?tool=n", "headers": {"Accept": "application/x-ndjson"}}):
        response = await api.client.get(kwargs["path"], headers=api.headers(extra=kwargs["headers"]))
        assert response.status == 200 and response.content_type == "application/x-ndjson"
        lines = (await response.text()).splitlines()
        assert len(lines) == 2500
        assert {json.loads(line)["tool"] for line in lines} == {"n"}
    response = await api.client.get("/v1/spans?tool=n&format=ndjson&order=asc", headers=api.headers())
    lines = (await response.text()).splitlines()
    assert [json.loads(line)["input"] for line in lines[:3]] == ["0", "1", "2"] and len(lines) == 2500


async def test_sandbox_trace_ingest_read_and_live_stream(api, other_tenant_key):
    await add_sandbox(api, "sbx_mine")
    await add_sandbox(api, "sbx_theirs", await tenant_of(api, other_tenant_key))
    bus = api.app[EVENTS]
    live: list = []

    async def follow():
        async for event in bus.subscribe("sandbox:sbx_mine"):
            live.append(event)
            if len(live) == 2:
                return

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0)
    body = await post_events(api, [
        {"event_type": "span", "tool": "agent", "span_id": "span_sb1"},
        {"event_type": "tool_call", "tool": "ls", "parent_span_id": "span_sb1", "sandbox_id": "sbx_other"},
    ], path="/v1/sandboxes/sbx_mine/trace")
    assert body["accepted"] == 1 and body["errors"][0]["loc"] == "events.1.sandbox_id"
    token = await auth.create_sandbox_token(api.app[STORE], api.app[DEFAULT_TENANT_ID], "sbx_mine")
    await post_events(api, [{"event_type": "tool_call", "tool": "ls", "parent_span_id": "span_sb1"}],
                      path="/v1/sandboxes/sbx_mine/trace", key=token)
    await asyncio.wait_for(follower, 5)
    assert [e["event_type"] for e in live] == ["trace", "trace"]
    assert live[1]["data"]["tool"] == "ls" and live[1]["data"]["sandbox_id"] == "sbx_mine"

    for key in (api.key, token):
        response, page = await api.get("/v1/sandboxes/sbx_mine/trace", key=key)
        assert response.status == 200 and page["count"] == 2
        assert {e["sandbox_id"] for e in page["items"]} == {"sbx_mine"}
        assert {e["source"] for e in page["items"]} == {"sandbox"}
    _, page = await api.get("/v1/traces?sandbox_id=sbx_mine&tool=ls")
    assert page["count"] == 1
    # the token is scoped to its sandbox: no other sandbox, no /v1/traces
    response, _ = await api.post("/v1/sandboxes/sbx_other/trace", json={"events": []}, key=token)
    assert response.status == 403
    response, _ = await api.post("/v1/traces", json={"events": []}, key=token)
    assert response.status == 403
    response, body = await api.post("/v1/sandboxes/sbx_theirs/trace", json={"events": []})
    assert response.status == 403 and body["error"] == "forbidden"
    response, body = await api.get("/v1/sandboxes/sbx_theirs/trace")
    assert response.status == 403
    response, body = await api.post("/v1/sandboxes/sbx_nope/trace", json={"events": []})
    assert response.status == 404 and body["details"]["resource"] == "sandbox"
    response, body = await api.get("/v1/sandboxes/sbx_nope/trace")
    assert response.status == 404


async def test_run_stamps_are_kept_and_filterable(api):
    stamps = {"run_id": "run_9", "experiment_id": "exp-9", "scenario_id": "sc-1", "agent": "solver", "agent_version": 3}
    await add_experiment(api, "exp-9")
    await post_events(api, [{"event_type": "tool_call", "tool": "t", **stamps}])
    _, page = await api.get("/v1/traces?run_id=run_9&scenario_id=sc-1&agent_version=3")
    event = page["items"][0]
    assert {k: event[k] for k in stamps} == {**stamps, "agent_version": "3"}


async def test_agent_traces_with_metrics(api):
    events = []
    for i, (tool, status, ms) in enumerate([("search", "ok", 10), ("search", "error", 30), ("read", "ok", 20), ("read", "ok", 40)]):
        events.append({"event_type": "tool_call", "tool": tool, "status": status, "duration_ms": ms, "agent": "solver", "agent_version": "2"})
    events.append({"event_type": "llm_call", "tool": "chat", "duration_ms": 100, "agent": "solver", "agent_version": "2",
                   "cost": {"model": "gpt-4o-mini", "input_tokens": 1_000_000, "output_tokens": 0}})
    events.append({"event_type": "tool_call", "tool": "search", "status": "ok", "duration_ms": 1, "agent": "solver", "agent_version": "1"})
    events.append({"event_type": "tool_call", "tool": "search", "phase": "start", "span_id": "span_open", "agent": "solver", "agent_version": "2"})
    await post_events(api, events)
    response, body = await api.get("/v1/agents/solver/traces?version=2&limit=3")
    assert response.status == 200, body
    assert body["agent"] == "solver" and body["version"] == "2" and body["count"] == 3 and body["next_cursor"]
    metrics = body["metrics"]
    assert metrics["tool_calls"] == 4 and metrics["llm_calls"] == 1
    assert metrics["tool_success_rate"] == 0.75
    assert metrics["latency_p50_ms"] == 30 and metrics["latency_p95_ms"] == 88.0
    assert metrics["total_cost_usd"] == 0.15
    assert metrics["tools"] == {"read": {"count": 2, "mean_ms": 30.0, "error_rate": 0.0},
                                "search": {"count": 2, "mean_ms": 20.0, "error_rate": 0.5}}
    _, everything = await api.get("/v1/agents/solver/traces")
    assert everything["count"] == 7 and everything["metrics"]["tool_calls"] == 5
    _, nobody = await api.get("/v1/agents/ghost/traces")
    assert nobody["items"] == [] and nobody["metrics"]["tool_success_rate"] is None


async def test_concurrent_ingest_shares_commits_and_loses_nothing(api):
    async def one(i: int):
        return await post_events(api, [{"event_type": "tool_call", "tool": f"c{i}", "input": str(j)} for j in range(50)])

    results = await asyncio.gather(*(one(i) for i in range(20)))
    assert all(r["accepted"] == 50 for r in results)
    _, page = await api.get("/v1/traces?limit=1000")
    assert page["count"] == 1000
    writer = api.app[TRACE_WRITER]
    assert writer.stats["rows"] == 1000


async def test_openapi_documents_trace_routes(api):
    _, doc = await api.get("/v1/openapi.json")
    for path in ("/v1/traces", "/v1/traces/{trace_id}", "/v1/spans", "/v1/sandboxes/{sandbox_id}/trace",
                 "/v1/agents/{name}/traces", "/otel/v1/traces"):
        assert path in doc["paths"], path
    assert "TraceDetail" in doc["components"]["schemas"] and "Span" in doc["components"]["schemas"]


async def test_writer_keeps_planner_statistics_fresh(api):
    await post_events(api, [{"event_type": "tool_call", "tool": f"t{i % 10}", "span_id": f"span_stat{i}"} for i in range(10_000)])
    writer = api.app[TRACE_WRITER]
    assert writer.stats["analyzed"] == 1
    rows = await api.app[TRACE_DB].fetchall("SELECT idx FROM sqlite_stat1 WHERE tbl = 'trace_events'")
    assert {r["idx"] for r in rows} >= {"trace_events_span", "trace_events_tenant"}
    plan = await api.app[TRACE_DB].fetchall(
        "EXPLAIN QUERY PLAN SELECT * FROM trace_events WHERE tenant_id = ? AND span_id = ?", ("t", "span_stat5"))
    assert "trace_events_span" in plan[0]["detail"]


async def test_big_trace_is_built_off_the_event_loop_and_still_a_tree(api):
    events = [{"event_type": "span", "phase": "start", "span_id": "span_big", "tool": "agent", "trace_id": "trace-big"}]
    for i in range(1500):
        parent = "span_big" if i < 30 else f"span_c{i % 30}"
        events.append({"event_type": "tool_call", "phase": "start", "span_id": f"span_c{i}", "parent_span_id": parent,
                       "trace_id": "trace-big", "tool": "t", "ts": f"2025-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"})
    events += [{"event_type": "tool_call", "phase": "end", "span_id": f"span_c{i}", "duration_ms": 1} for i in range(1500)]
    await post_events(api, events)
    response, detail = await api.get("/v1/traces/trace-big")
    assert response.status == 200 and detail["span_count"] == 1501 and detail["event_count"] == 3001
    spans = detail["spans"]
    position = {s["span_id"]: n for n, s in enumerate(spans)}
    assert spans[0]["span_id"] == "span_big" and all(position[s["parent_span_id"]] < position[s["span_id"]] for s in spans[1:])
    assert {s["depth"] for s in spans} == {0, 1, 2} and all(not s["open"] for s in spans[1:])
