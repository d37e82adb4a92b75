"""The trace tree against real trace storage: 10,000 spans stored through `POST /v1/traces`, read back
through `GET /v1/traces/{id}`, shown lazily (only expanded levels become tree nodes), expanding and
jumping to the error deep inside work, and live events merge into an open tree."""
from __future__ import annotations


from client.typed import TypedApi
from tests.support.tui import make_app, screen_text, wait_for
from tui.screens.run import RunScreen
from tui.widgets.span_tree import CHUNK, SpanTree

TRACE_ID = "trace-tui10k"
LLM_CALLS, TOOLS_PER_CALL = 500, 19  # 1 root + 500 + 9,500 = 10,001 spans
ERROR_AT = (377, 11)


def big_trace() -> list[dict]:
    ts = "2025-01-01T00:00:00Z"
    events = [{"trace_id": TRACE_ID, "span_id": "span_root", "event_type": "tool_call", "tool": "agent", "phase": "complete",
               "ts": ts, "duration_ms": 90_000, "status": "ok"}]
    for i in range(LLM_CALLS):
        llm = f"span_llm{i:04d}"
        events.append({"trace_id": TRACE_ID, "span_id": llm, "parent_span_id": "span_root", "event_type": "llm_call",
                       "tool": "chat", "phase": "complete", "ts": ts, "duration_ms": 800 + i, "status": "ok",
                       "cost": {"model": "gpt-4o-mini", "input_tokens": 1200, "output_tokens": 90}})
        for j in range(TOOLS_PER_CALL):
            error = (i, j) == ERROR_AT
            events.append({"trace_id": TRACE_ID, "span_id": f"span_t{i:04d}_{j:02d}", "parent_span_id": llm,
                           "event_type": "tool_call", "tool": "read_file" if j % 2 else "run_tests", "phase": "complete",
                           "ts": ts, "duration_ms": 12, "status": "error" if error else "ok",
                           "error_type": "tool_error" if error else None, "input": '{"path": "src/app.py"}',
                           "output": "boom: exit 2" if error else "ok"})
    return [{k: v for k, v in e.items() if v is not None} for e in events]


def the_tree(app) -> SpanTree | None:
    found = app.screen.query(SpanTree) if isinstance(app.screen, RunScreen) else []
    return found[0] if found else None


async def seed(api) -> None:
    events = big_trace()
    for start in range(0, len(events), 2500):
        answer = await api.post("/v1/traces", {"events": events[start:start + 2500]})
        assert answer["rejected"] == 0, answer["errors"][:3]


async def test_ten_thousand_spans_load_lazily_and_expand(daemon, api):
    await seed(api)
    app = make_app(daemon)
    async with app.run_test(size=(120, 40)) as pilot:
        app.push_screen(RunScreen(trace_id=TRACE_ID))
        tree = await wait_for(pilot, lambda: the_tree(app), what="the run screen")
        # how long it takes is tests/bench/bench_tui.py's business; here: all of it arrives
        await wait_for(pilot, lambda: len(tree.index) == 10_001, timeout=30, what="10,001 spans")
        assert len(tree._span_nodes) == 1  # only the root level exists as nodes
        assert tree.index.totals["llm_calls"] == LLM_CALLS and tree.index.totals["errors"] == 1
        assert "⚠ error inside" in str(tree._span_nodes["span_root"].label)
        text = screen_text(app)
        assert "10,001 spans" in text and "500 llm" in text and "1 error(s) in the trace" in text

        tree.focus()
        tree.move_cursor(tree._span_nodes["span_root"])
        await pilot.press("space")  # expand the root: its first chunk of children appears
        await wait_for(pilot, lambda: len(tree._span_nodes) == 1 + CHUNK, what="the first chunk")
        assert tree._span_nodes["span_root"].is_expanded
        assert any("more" in str(child.label) for child in tree._span_nodes["span_root"].children)
        await wait_for(pilot, lambda: "gpt-4o-mini" in screen_text(app), what="LLM call labels")
        assert "1200→90 tok" in screen_text(app)

        await pilot.press("n")  # jump to the error: chunks and ancestors are materialised on the way
        target = f"span_t{ERROR_AT[0]:04d}_{ERROR_AT[1]:02d}"
        await wait_for(pilot, lambda: tree.cursor_node is not None and tree.cursor_node.data == target, what="the error span")
        assert tree._span_nodes[f"span_llm{ERROR_AT[0]:04d}"].is_expanded
        assert len(tree._span_nodes) < 1 + 2 * CHUNK + TOOLS_PER_CALL + 5  # still lazy
        await wait_for(pilot, lambda: "boom: exit 2" in screen_text(app), what="the span detail with the error output")
        await wait_for(pilot, lambda: "✗ tool_error" in screen_text(app), what="the error span on screen")


async def test_live_events_merge_into_an_open_tree(daemon, api):
    await api.post("/v1/traces", {"events": [{"trace_id": "trace-live1", "span_id": "span_a", "event_type": "llm_call",
                                              "tool": "chat", "phase": "start", "ts": "2025-01-01T00:00:00Z"}]})
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        app.push_screen(RunScreen(trace_id="trace-live1"))
        tree = await wait_for(pilot, lambda: the_tree(app), what="the run screen")
        await wait_for(pilot, lambda: len(tree.index) == 1, what="the open span")
        assert "running…" in str(tree._span_nodes["span_a"].label)
        later = [  # the span ends with its cost; a failing tool call inside it
            {"trace_id": "trace-live1", "span_id": "span_a", "phase": "end", "duration_ms": 1500, "status": "ok",
             "event_type": "llm_call", "tool": "chat", "ts": "2025-01-01T00:00:02Z", "cost": {"model": "gpt-4o", "input_tokens": 40000, "output_tokens": 15000}},
            {"trace_id": "trace-live1", "span_id": "span_b", "parent_span_id": "span_a", "event_type": "tool_call", "tool": "grep",
             "phase": "complete", "status": "error", "error_type": "tool_error", "duration_ms": 3, "ts": "2025-01-01T00:00:01Z"},
        ]
        await api.post("/v1/traces", {"events": later})
        stored = [e async for e in TypedApi(api).trace_events(trace_id="trace-live1") if e.span_id in ("span_a", "span_b") and e.phase != "start"]
        app.screen._pending_trace.extend(stored)  # the stored TraceEvents, as the lifecycle stream delivers them
        await wait_for(pilot, lambda: len(tree.index) == 2, what="the new span")
        label = str(tree._span_nodes["span_a"].label)
        assert "1.5s" in label and "$0.25" in label and "⚠ error inside" in label
        await wait_for(pilot, lambda: "$0.25" in screen_text(app), what="the cost in the summary")
