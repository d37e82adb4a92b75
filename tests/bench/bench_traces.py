"""Benchmark: trace ingest and reads against a real svcd subprocess over its Unix socket.

Prints: sustained ingest (events/s) for JSON batches of 100 and 1000, OTLP protobuf ingest
(spans/s, 512-span exports like the SDK's BatchSpanProcessor), `GET /v1/spans?trace_id=` p50/p99
and `GET /v1/traces?trace_id=` p50/p99 once the store holds `--events` events (default 1 million),
and `GET /v1/traces/{id}` for a 10,000-span trace. Asserts nothing.

    .venv/bin/python -m tests.bench.bench_traces [--events 1000000] [--clients 4] [--seconds 10]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def sdk_like_events(n: int, prefix: str, spans_per_trace: int = 50) -> list[dict]:
    """What the SDK sends for an agent: per trace a root span (start/end), llm_call completes with
    cost, tool_use invokes and tool_call start/end pairs, with ~100-300 bytes of input/output."""
    events: list[dict] = []
    t = 0
    while len(events) < n:
        trace = f"trace-{prefix}{t:08x}"
        root = f"span_{prefix}r{t:06x}"
        events.append({"event_type": "span", "phase": "start", "tool": "agent", "trace_id": trace, "span_id": root,
                       "root_span_id": root, "input": json.dumps({"task": "fix the failing test in src/app.py " * 3}), "agent": "bench-bot"})
        i = 0
        while len(events) < n - 1 and i < spans_per_trace:
            llm = f"span_{prefix}{t:06x}l{i:04x}"
            events.append({"event_type": "llm_call", "phase": "complete", "tool": "openai.chat.completions.create", "trace_id": trace,
                           "span_id": llm, "parent_span_id": root, "root_span_id": root, "duration_ms": 812.5,
                           "cost": {"model": "gpt-4o-2024-08-06", "input_tokens": 1234, "output_tokens": 56, "cached_tokens": 1000},
                           "input": json.dumps({"messages": [{"role": "user", "content": "please look at the file " * 4}]}),
                           "output": json.dumps({"tool_calls": [{"name": "read_file", "arguments": "{\"path\": \"src/app.py\"}"}]}),
                           "metadata": {"provider": "openai", "finish_reason": "tool_calls"}, "agent": "bench-bot"})
            use = f"span_{prefix}{t:06x}u{i:04x}"
            events.append({"event_type": "tool_use", "phase": "invoked", "tool": "read_file", "trace_id": trace, "span_id": use,
                           "parent_span_id": llm, "root_span_id": root, "input": "{\"path\": \"src/app.py\"}", "agent": "bench-bot"})
            call = f"span_{prefix}{t:06x}c{i:04x}"
            events.append({"event_type": "tool_call", "phase": "start", "tool": "read_file", "trace_id": trace, "span_id": call,
                           "parent_span_id": llm, "root_span_id": root, "input": "{\"path\": \"src/app.py\"}", "agent": "bench-bot"})
            events.append({"event_type": "tool_call", "phase": "end", "tool": "read_file", "trace_id": trace, "span_id": call,
                           "parent_span_id": llm, "root_span_id": root, "duration_ms": 3.2, "status": "ok",
                           "output": "def app():\n    return 42\n" * 6, "agent": "bench-bot"})
            i += 1
        events.append({"event_type": "span", "phase": "end", "tool": "agent", "trace_id": trace, "span_id": root,
                       "root_span_id": root, "duration_ms": 45000, "status": "ok", "output": "\"done\"", "agent": "bench-bot"})
        t += 1
    return events[:n]


class Batches:
    """Pre-serialised request bodies; each use swaps in a fresh id prefix so every event is new."""

    def __init__(self, size: int):
        self.template = json.dumps({"events": sdk_like_events(size, "PFX")})
        self.size = size

    def body(self) -> bytes:
        return self.template.replace("PFX", secrets.token_hex(5)).encode()


MARK = b"\xfe\xed\xfa\xce"


def otlp_body(spans: int) -> bytes:
    """An ExportTraceServiceRequest of `spans` spans (traces of 50: a root, chat and tool children)
    whose ids all start with MARK, so each use can swap in fresh ids cheaply (OtlpBodies)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    out = []
    now = time.time_ns()
    for i in range(spans):
        trace = MARK + (i // 50).to_bytes(12, "big")
        root = MARK + (i - i % 50).to_bytes(4, "big")
        span = Span(trace_id=trace, span_id=MARK + i.to_bytes(4, "big"), name="chat gpt-4o" if i % 2 else "execute_tool search",
                    start_time_unix_nano=now, end_time_unix_nano=now + 5_000_000)
        if i % 50:
            span.parent_span_id = root
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 100,
                 "gen_ai.usage.output_tokens": 20} if i % 2 else {"gen_ai.tool.name": "search"}
        for k, v in attrs.items():
            span.attributes.append(KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=v)))
        out.append(span)
    rs = ResourceSpans(scope_spans=[ScopeSpans(spans=out)])
    rs.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="bench")))
    body = ExportTraceServiceRequest(resource_spans=[rs]).SerializeToString()
    return body


class OtlpBodies:
    def __init__(self, spans: int):
        self.template = otlp_body(spans)

    def body(self) -> bytes:
        return self.template.replace(MARK, secrets.token_bytes(4))


async def ingest(session: aiohttp.ClientSession, headers: dict, make_body, per_request: int, seconds: float, clients: int,
                 path: str = "/v1/traces", content_type: str = "application/json", total: int | None = None) -> tuple[int, float]:
    """Post bodies from `clients` concurrent workers for `seconds` (or until `total` events); (events, wall s)."""
    sent = [0]
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop_at and (total is None or sent[0] < total):
            body = make_body()
            async with session.post(f"http://svcd{path}", data=body, headers={**headers, "Content-Type": content_type}) as r:
                data = await r.read()
                assert r.status in (200, 202), (r.status, data[:300])
            sent[0] += per_request

    started = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(clients)])
    return sent[0], time.perf_counter() - started


async def latencies(session: aiohttp.ClientSession, headers: dict, urls: list[str]) -> list[float]:
    out = []
    for url in urls:
        started = time.perf_counter()
        async with session.get(f"http://svcd{url}", headers=headers) as r:
            await r.read()
            assert r.status == 200, r.status
        out.append((time.perf_counter() - started) * 1000)
    return out


async def main(total_events: int, clients: int, seconds: float, keep: bool = False) -> None:
    home = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
    sock = home / "svcd.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(sock), SERVICE_PORT="0", SERVICE_RATE_LIMIT="0")
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, stderr=subprocess.DEVNULL)
    try:
        connector = aiohttp.UnixConnector(path=str(sock), limit=clients * 2)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
            for _ in range(2000):
                try:
                    async with session.get("http://svcd/health") as r:
                        if r.status == 200:
                            break
                except (aiohttp.ClientError, FileNotFoundError):
                    await asyncio.sleep(0.01)
            key = (home / "credentials").read_text().split("=", 1)[1].strip()
            headers = {"Authorization": f"Bearer {key}"}
            stored = 0
            print(f"svcd pid {proc.pid}, {os.cpu_count()} CPUs, {clients} concurrent clients, Unix socket")

            for size in (100, 1000):
                batches = Batches(size)
                await ingest(session, headers, batches.body, size, 1.0, clients)  # warm-up
                events, wall = await ingest(session, headers, batches.body, size, seconds, clients)
                stored += events
                print(f"ingest JSON, batches of {size:>4}: {events / wall:>9,.0f} events/s  ({events:,} events in {wall:.1f} s)")

            bodies = OtlpBodies(512)
            spans, wall = await ingest(session, headers, bodies.body, 512, seconds, clients, "/otel/v1/traces", "application/x-protobuf")
            stored += spans
            print(f"ingest OTLP protobuf, 512/export: {spans / wall:>9,.0f} spans/s   ({spans:,} spans in {wall:.1f} s)")

            big = Batches(5000)
            remaining = max(0, total_events - stored - 20_000)
            if remaining:
                filled, wall = await ingest(session, headers, big.body, 5000, 3600, clients, total=remaining)
                stored += filled
                print(f"filled to {stored:,} events ({filled / wall:,.0f} events/s in batches of 5000)")

            # a 10,000-span trace: 20,000 events (start + end per span), posted in order
            trace_id = "trace-bench-10k"
            root = "span_bench_root"
            events = [{"event_type": "span", "phase": "start", "tool": "agent", "trace_id": trace_id, "span_id": root}]
            for i in range(1, 10_000):
                parent = root if i < 100 else f"span_b{(i % 99) + 1:05d}"
                events.append({"event_type": "tool_call", "phase": "start", "tool": f"t{i % 7}", "trace_id": trace_id,
                               "span_id": f"span_b{i:05d}", "parent_span_id": parent, "input": "x" * 64})
            for i in range(1, 10_000):
                events.append({"event_type": "tool_call", "phase": "end", "span_id": f"span_b{i:05d}", "trace_id": trace_id,
                               "duration_ms": i % 50, "output": "y" * 64})
            events.append({"event_type": "span", "phase": "end", "span_id": root, "trace_id": trace_id, "duration_ms": 1000})
            for start in range(0, len(events), 10_000):
                async with session.post("http://svcd/v1/traces", json={"events": events[start:start + 10_000]}, headers=headers) as r:
                    assert r.status == 202, await r.text()
            stored += len(events)

            async with session.get("http://svcd/v1/traces?limit=1&order=asc", headers=headers) as r:
                first = (await r.json())["items"][0]
            print(f"store holds {stored:,} events")

            # random traces from the whole store: pick seqs, read their trace ids
            sample_traces = set()
            for seq in random.sample(range(1, stored), 200):
                async with session.get(f"http://svcd/v1/traces?limit=1&cursor={_cursor(seq + 1)}", headers=headers) as r:
                    items = (await r.json())["items"]
                    if items:
                        sample_traces.add(items[0]["trace_id"])
            sample_traces.add(first["trace_id"])
            traces = list(sample_traces)
            await latencies(session, headers, [f"/v1/spans?trace_id={t}" for t in traces[:50]])  # warm-up
            for label, template in (("GET /v1/spans?trace_id=", "/v1/spans?trace_id={}"),
                                    ("GET /v1/traces?trace_id=", "/v1/traces?trace_id={}")):
                urls = [template.format(random.choice(traces)) for _ in range(1000)]
                lat = await latencies(session, headers, urls)
                print(f"{label:<26} (100/page, {len(traces)} traces): p50 {statistics.median(lat):6.2f} ms  p99 {percentile(lat, 99):6.2f} ms")
            lat = await latencies(session, headers, [f"/v1/spans?trace_id={trace_id}"] * 200)
            print(f"GET /v1/spans?trace_id=   (10k-span trace, 1st page): p50 {statistics.median(lat):6.2f} ms  p99 {percentile(lat, 99):6.2f} ms")
            lat = await latencies(session, headers, [f"/v1/traces/{trace_id}"] * 10)
            print(f"GET /v1/traces/{{id}} (10,000 spans, 20,000 events, tree): p50 {statistics.median(lat):6.0f} ms  max {max(lat):6.0f} ms")
            lat = await latencies(session, headers, [f"/v1/traces/{random.choice(traces)}" for _ in range(200)])
            print(f"GET /v1/traces/{{id}} (sampled traces, ~200 events): p50 {statistics.median(lat):6.2f} ms  p99 {percentile(lat, 99):6.2f} ms")
            db_mb = sum(p.stat().st_size for p in home.glob("svc.db*")) / 1e6
            print(f"database size: {db_mb:,.0f} MB ({db_mb * 1e6 / stored:,.0f} bytes/event)")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        if keep:
            print(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


def _cursor(seq: int) -> str:
    import base64

    return base64.urlsafe_b64encode(str(seq).encode()).decode().rstrip("=")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the store before measuring reads")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each ingest measurement")
    parser.add_argument("--keep", action="store_true", help="keep the daemon's home (database) afterwards")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.clients, args.seconds, args.keep))
