"""Benchmark: the model gateway (daemon/sandbox/programs/model_gateway.py, a host subprocess as in
its container) in front of the fake provider (tests/support/provider_server.py, its own process),
against the same provider reached directly in the same run.

* added latency per non-streaming Chat Completions call: p50 / p99 through the gateway minus direct,
  calls alternating between the two over kept-alive connections (targets: p50 <= 2 ms, p99 <= 10 ms);
* streaming: time to the first body bytes through the gateway vs direct (target: within 5 ms), and
  the gaps between the chunks (the provider sends one event every `--gap-ms`): median and p99 gap
  through the gateway vs direct (preserved: the same within a millisecond or two);
* 200 concurrent streaming calls through one gateway: errors (target 0), incomplete streams, wall time
  (and the same directly, for reference);
* the gateway's cold start (process start to listening).

Prints numbers and asserts nothing.

    .venv/bin/python -m tests.bench.bench_gateway [--calls 300] [--streams 15] [--concurrent 200]
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from tests.support.model_gateway import GatewayProcess

TOKEN = "svc-gw-bench-token"
KEY = "sk-bench-real-key-0123456789"

# The provider in its own process, so its event loop does not share a GIL with the measuring client.
PROVIDER = r"""
import sys, time
from tests.support.provider_server import ProviderServer, Turn
gap = float(sys.argv[1])
server = ProviderServer().start()
def respond(request):
    model = (request["body"] or {}).get("model")
    if model == "bench-stream":
        return Turn(text="x" * 200, pieces=20, gap_s=gap)
    if model == "bench-concurrent":
        return Turn(text="y" * 100, pieces=10, gap_s=0.05)
    return Turn(text="ok")
server.respond = respond
print(server.url, flush=True)
while True:
    time.sleep(3600)
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Client:
    """One kept-alive HTTP/1.1 connection."""

    def __init__(self, url: str, headers: dict[str, str]):
        parts = urlsplit(url)
        self.prefix = parts.path
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self.headers = {"Content-Type": "application/json", **headers}

    def post(self, path: str, body: dict) -> http.client.HTTPResponse:
        self.conn.request("POST", self.prefix + path, body=json.dumps(body).encode(), headers=self.headers)
        return self.conn.getresponse()

    def plain_ms(self) -> float:
        t0 = time.perf_counter()
        resp = self.post("/chat/completions", {"model": "bench-plain", "messages": [{"role": "user", "content": "hi"}]})
        resp.read()
        assert resp.status == 200, resp.status
        return (time.perf_counter() - t0) * 1000

    def stream_times(self) -> tuple[float, list[float]]:
        """(ms to the first body bytes, ms between successive reads)."""
        t0 = time.perf_counter()
        resp = self.post("/chat/completions", {"model": "bench-stream", "stream": True,
                                               "messages": [{"role": "user", "content": "hi"}]})
        assert resp.status == 200, resp.status
        stamps = []
        while True:
            data = resp.read1(65536)
            if not data:
                break
            stamps.append(time.perf_counter())
        gaps = [(b - a) * 1000 for a, b in zip(stamps, stamps[1:])]
        return (stamps[0] - t0) * 1000, gaps


async def concurrent_streams(url: str, n: int, auth: str) -> tuple[int, int, float, list[str]]:
    """(errors, incomplete streams, wall seconds, first error messages) of n streams at once."""
    errors, incomplete, messages = 0, 0, []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        async def one() -> None:
            nonlocal errors, incomplete
            try:
                async with session.post(url + "/chat/completions", headers={"Authorization": f"Bearer {auth}"},
                                        json={"model": "bench-concurrent", "stream": True,
                                              "messages": [{"role": "user", "content": "hi"}]}) as resp:
                    body = await resp.read()
                    if resp.status != 200:
                        errors += 1
                        messages.append(f"status {resp.status}: {body[:120]!r}")
                    elif b"[DONE]" not in body:
                        incomplete += 1
            except Exception as exc:  # counted, the run goes on
                errors += 1
                messages.append(f"{type(exc).__name__}: {exc}")

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return errors, incomplete, time.perf_counter() - t0, messages[:3]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300, help="non-streaming calls each way")
    ap.add_argument("--streams", type=int, default=15, help="streamed calls each way")
    ap.add_argument("--gap-ms", type=float, default=10.0, help="gap between the provider's stream events")
    ap.add_argument("--concurrent", type=int, default=200)
    args = ap.parse_args()

    provider = subprocess.Popen([sys.executable, "-c", PROVIDER, str(args.gap_ms / 1000)], stdout=subprocess.PIPE,
                                text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        base = provider.stdout.readline().strip()  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            gw = GatewayProcess(Path(tmp), {"openai": {"base_url": base + "/v1", "key": KEY}}, token=TOKEN,
                                allow_private=True, pricing={"bench-plain": [1.0, 1.0]}).start()
            cold_ms = (time.perf_counter() - t0) * 1000
            try:
                run(args, base + "/v1", gw, cold_ms)
            finally:
                gw.stop()
    finally:
        provider.terminate()
        provider.wait(10)


def run(args: argparse.Namespace, direct_url: str, gw: GatewayProcess, cold_ms: float) -> None:
    direct = Client(direct_url, {"Authorization": f"Bearer {KEY}"})
    through = Client(gw.openai_url, {"Authorization": f"Bearer {TOKEN}"})
    for _ in range(20):  # warm both paths (connections, the gateway's upstream pool)
        direct.plain_ms()
        through.plain_ms()
    d_ms, g_ms = [], []
    for _ in range(args.calls):
        d_ms.append(direct.plain_ms())
        g_ms.append(through.plain_ms())
    print(f"model gateway vs direct, fake provider in its own process (gateway cold start {cold_ms:.0f} ms)")
    print(f"non-streaming calls: {args.calls} each way, alternating, kept-alive connections")
    print(f"  direct   p50 {pct(d_ms, 50):6.2f} ms   p99 {pct(d_ms, 99):6.2f} ms")
    print(f"  gateway  p50 {pct(g_ms, 50):6.2f} ms   p99 {pct(g_ms, 99):6.2f} ms")
    print(f"  added    p50 {pct(g_ms, 50) - pct(d_ms, 50):6.2f} ms   p99 {pct(g_ms, 99) - pct(d_ms, 99):6.2f} ms"
          "   targets: p50 <= 2 ms, p99 <= 10 ms")

    d_ttft, g_ttft, d_gaps, g_gaps = [], [], [], []
    for _ in range(args.streams):
        ttft, gaps = direct.stream_times()
        d_ttft.append(ttft)
        d_gaps += gaps
        ttft, gaps = through.stream_times()
        g_ttft.append(ttft)
        g_gaps += gaps
    print(f"streaming calls: {args.streams} each way, 23 events {args.gap_ms:.0f} ms apart")
    print(f"  first chunk  direct p50 {statistics.median(d_ttft):6.2f} ms   gateway p50 {statistics.median(g_ttft):6.2f}"
          f" ms   difference {statistics.median(g_ttft) - statistics.median(d_ttft):6.2f} ms   target <= 5 ms")
    print(f"  chunk gaps   direct median {statistics.median(d_gaps):6.2f} p99 {pct(d_gaps, 99):6.2f} ms ({len(d_gaps)})"
          f"   gateway median {statistics.median(g_gaps):6.2f} p99 {pct(g_gaps, 99):6.2f} ms ({len(g_gaps)})")

    print(f"concurrent streams: {args.concurrent} at once, 13 events 50 ms apart each (one stream alone: ~0.6 s)")
    for label, url, auth in (("direct ", direct_url, KEY), ("gateway", gw.openai_url, TOKEN)):
        errors, incomplete, wall, messages = asyncio.run(concurrent_streams(url, args.concurrent, auth))
        print(f"  {label}  errors {errors}   incomplete {incomplete}   wall {wall:.2f} s" +
              ("   target: 0 errors" if label == "gateway" else ""))
        for message in messages:
            print(f"    {message}")
    lines = len(gw.records())
    print(f"  record lines written: {lines} (every call of this run)")


if __name__ == "__main__":
    main()
