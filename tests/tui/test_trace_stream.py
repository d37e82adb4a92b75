"""The run view fed by a real daemon's lifecycle stream: trace events an agent posts to its sandbox
arrive as the stream's `trace` events and become the span tree the user reads."""
from __future__ import annotations

import pytest

from tests.support.images import PYTHON
from tests.support.tui import eventually, make_app, screen_text, wait_for
from tui.screens.run import RunScreen

pytestmark = pytest.mark.docker


async def test_streamed_trace_events_become_the_span_tree(daemon, api, stock_images):
    created = await api.post("/v1/sandboxes", {"image": PYTHON})
    sandbox_id = created["id"]

    async def ready():
        return (await api.get(f"/v1/sandboxes/{sandbox_id}"))["state"] in ("ready", "running")

    assert await eventually(ready, timeout=60), "the sandbox never became ready"
    app = make_app(daemon)
    try:
        async with app.run_test(size=(140, 36)) as pilot:
            await app.push_screen(RunScreen(sandbox_id=sandbox_id))
            screen = app.screen
            await wait_for(pilot, lambda: screen._sandbox_stream, timeout=15, what="the live lifecycle stream")
            await api.post(f"/v1/sandboxes/{sandbox_id}/trace", {"events": [
                {"span_id": "span_plan", "event_type": "llm_call", "tool": "plan", "phase": "start"},
                {"span_id": "span_grep", "parent_span_id": "span_plan", "event_type": "tool_call", "tool": "grep",
                 "phase": "complete", "status": "error", "error_type": "tool_error", "duration_ms": 40},
                {"span_id": "span_plan", "event_type": "llm_call", "tool": "plan", "phase": "end", "duration_ms": 1500,
                 "cost": {"model": "gpt-4o", "input_tokens": 40000, "output_tokens": 15000}},
            ]})
            await wait_for(pilot, lambda: "⚠ error inside" in screen_text(app), timeout=15, what="the streamed spans")
            line = next(row for row in screen_text(app).splitlines() if "plan" in row and "gpt-4o" in row)
            assert all(part in line for part in ("40000→15000 tok", "$0.25", "1.5s", "⚠ error inside")), line
    finally:
        await api.delete(f"/v1/sandboxes/{sandbox_id}")
