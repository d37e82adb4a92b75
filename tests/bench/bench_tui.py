"""Benchmark of the TUI (headless Textual) against a real svcd running in its own process, as in
real use. Prints numbers; asserts nothing. Targets (issue 8): first paint under 500 ms, updates
under 50 ms.

    .venv/bin/python -m tests.bench.bench_tui [--spans 10000] [--experiments 50] [--rate 100] [--seconds 5]

- first paint: app start -> first frame, and -> the dashboard showing every experiment;
- 10,000-span trace: fetch (GET /v1/traces/{id}), index + lazy tree build, first paint of the run
  view, expanding a 500-child node, jumping to the one error 3 levels deep;
- live updates: events streamed into an open run view at --rate events/s (what the lifecycle
  stream delivers), applied in 100 ms batches: time from a batch's arrival to the repainted screen.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from client.api import Client
from client.config import ClientConfig, read_env_file
from tests.support.tui import upload_spec


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def trace_events(n_spans: int, trace_id: str) -> list[dict]:
    per_call = 19
    calls = max(1, -(-(n_spans - 1) // (per_call + 1)))
    events = [{"trace_id": trace_id, "span_id": "span_root", "event_type": "tool_call", "tool": "agent", "phase": "complete",
               "duration_ms": 60_000, "status": "ok"}]
    for i in range(calls):
        events.append({"trace_id": trace_id, "span_id": f"span_l{i}", "parent_span_id": "span_root", "event_type": "llm_call",
                       "tool": "chat", "phase": "complete", "duration_ms": 700, "status": "ok",
                       "cost": {"model": "gpt-4o-mini", "input_tokens": 900, "output_tokens": 80}})
        for j in range(per_call):
            bad = i == calls * 3 // 4 and j == 7
            events.append({"trace_id": trace_id, "span_id": f"span_t{i}_{j}", "parent_span_id": f"span_l{i}",
                           "event_type": "tool_call", "tool": "read_file", "phase": "complete", "duration_ms": 9,
                           "status": "error" if bad else "ok", **({"error_type": "tool_error"} if bad else {})})
    return events[:n_spans]


async def bench(args: argparse.Namespace) -> None:
    from tui.app import SvcApp
    from tui.screens.dashboard import DashboardScreen
    from tui.screens.run import RunScreen

    short = Path(tempfile.mkdtemp(prefix="svcb"))
    home, sock = short / "home", short / "s.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(sock), SERVICE_PORT="0", SERVICE_RATE_LIMIT="100000")
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, stderr=subprocess.DEVNULL)
    while not (sock.exists() and (home / "credentials").exists()):
        await asyncio.sleep(0.02)
    config = ClientConfig(base_url=f"unix://{sock}", api_key=read_env_file(home / "credentials")["SERVICE_API_KEY"],
                          timeout=30, home=home, api_key_source="bench")
    api = Client(config)
    try:
        await upload_spec(api, "bench")
        for i in range(args.experiments):
            await api.post("/v1/experiments", {"spec_id": "bench", "name": f"exp {i:03d}"})
        events = trace_events(args.spans, "trace-bench")
        for start in range(0, len(events), 2500):
            await api.post("/v1/traces", {"events": events[start:start + 2500]})
        spans = len(events)

        # --- first paint ---------------------------------------------------------------------------
        started = time.perf_counter()
        app = SvcApp(config)
        async with app.run_test(size=(120, 40)) as pilot:
            first_frame = time.perf_counter() - started
            while not (isinstance(app.screen, DashboardScreen) and app.screen.table.row_count == args.experiments):
                await pilot.pause(0.005)
            await pilot.pause(0)
            with_data = time.perf_counter() - started
            print(f"first paint            {first_frame * 1000:7.0f} ms   (app start -> first frame)")
            print(f"dashboard with data    {with_data * 1000:7.0f} ms   ({args.experiments} experiments listed)   target < 500 ms")

            # --- the 10,000-span trace --------------------------------------------------------------
            t0 = time.perf_counter()
            fetched = await app.backend.trace_events(trace_id="trace-bench")
            fetch_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            screen = RunScreen(trace_id="trace-bench")
            await app.push_screen(screen)
            while len(screen.span_tree.index) < spans:
                await pilot.pause(0.005)
            await pilot.pause(0)
            shown_s = time.perf_counter() - t0
            tree = screen.span_tree
            t0 = time.perf_counter()
            tree.index = type(tree.index)()
            tree.load(fetched)
            build_s = time.perf_counter() - t0
            await pilot.pause(0)
            root = tree._span_nodes["span_root"]
            tree.focus()
            tree.move_cursor(root)
            t0 = time.perf_counter()
            root.expand()
            tree.populate(root)
            await pilot.pause(0)
            expand_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            tree.action_next_error()
            await pilot.pause(0)
            jump_s = time.perf_counter() - t0
            print(f"trace fetch            {fetch_s * 1000:7.0f} ms   ({spans:,} spans, GET /v1/traces/{{id}})")
            print(f"trace index + tree     {build_s * 1000:7.0f} ms   (lazy: {len(tree._span_nodes)} tree nodes built)")
            print(f"run view shown         {shown_s * 1000:7.0f} ms   (push -> {spans:,} spans on screen, fetch included)")
            print(f"expand 1 node          {expand_s * 1000:7.0f} ms   (first {min(200, spans)} children)")
            print(f"jump to the error      {jump_s * 1000:7.0f} ms   (n: chunks + ancestors materialised)")

            # --- live updates -----------------------------------------------------------------------
            batch = max(1, args.rate // 10)
            latencies: list[float] = []
            audit: list[float] = []
            end = time.perf_counter() + args.seconds
            k = 0
            while time.perf_counter() < end:
                tick = time.perf_counter()
                for _ in range(batch):
                    k += 1
                    screen._pending_trace.append({"span_id": f"span_live{k}", "parent_span_id": "span_root", "event_type": "tool_call",
                                                  "tool": "grep", "phase": "complete", "duration_ms": 3, "status": "ok"})
                    screen._pending_audit.append({"type": "process_spawn", "ts": "2025-01-01T00:00:00Z",
                                                  "details": {"command": f"grep {k}", "exit_code": 0}})
                t0 = time.perf_counter()
                screen.flush()
                applied = time.perf_counter() - t0
                await pilot.pause(0)  # let Textual repaint
                latencies.append((time.perf_counter() - t0) * 1000)
                audit.append(applied * 1000)
                await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - tick)))
            print(f"live updates           p50 {statistics.median(latencies):5.1f} ms  p95 {pct(latencies, 95):5.1f} ms  "
                  f"max {max(latencies):5.1f} ms   ({args.rate} events/s + as many audit events, 100 ms batches, "
                  f"apply p95 {pct(audit, 95):.1f} ms)   target < 50 ms")
    finally:
        await api.close()
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(short, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--experiments", type=int, default=50)
    parser.add_argument("--rate", type=int, default=100, help="events per second while streaming")
    parser.add_argument("--seconds", type=float, default=5.0)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
