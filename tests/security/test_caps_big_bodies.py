"""Finding 6 (traces): a 29 MiB trace batch was decoded and shaped on the event loop (about a second
each, /health waiting). Big bodies are now decoded and their events prepared in a worker thread."""
from __future__ import annotations

import asyncio
import threading

from daemon.api import traces as traces_api


async def test_health_answers_while_a_big_trace_batch_is_being_prepared(api, monkeypatch):
    """The ordering is the assertion: a /health sent while the batch is prepared answers before the
    preparation ends (held until /health answered, or 5 s; on the event loop /health must wait)."""
    order: list[str] = []
    started = threading.Event()
    health_done = threading.Event()
    real = traces_api.prepare_events

    def held(body, source, sandbox_id):
        started.set()
        health_done.wait(5)
        try:
            return real(body, source, sandbox_id)
        finally:
            order.append("prepared")

    monkeypatch.setattr(traces_api, "prepare_events", held)
    events = [{"event_type": "span", "tool": f"t{i}", "output": "x" * 2000} for i in range(1000)]  # about 2 MiB
    ingest = asyncio.ensure_future(api.post("/v1/traces", json={"events": events}))
    while not started.is_set():
        await asyncio.sleep(0.01)
    response = await api.client.get("/health")
    order.append(f"health {response.status}")
    health_done.set()
    response, body = await ingest
    assert (order, response.status, body["accepted"]) == (["health 200", "prepared"], 202, 1000)
