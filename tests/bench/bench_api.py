"""Benchmark: daemon start to first healthy answer, and GET /v1/specs/{id} latency over the Unix
socket and over TCP under 32 concurrent clients. Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_api [--requests 4000]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "examples" / "quickstart.yaml").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


async def hammer(session: aiohttp.ClientSession, url: str, headers: dict, total: int, clients: int) -> list[float]:
    latencies: list[float] = []
    remaining = [total]

    async def worker() -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            started = time.perf_counter()
            async with session.get(url, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*[worker() for _ in range(clients)])
    return latencies


async def main(requests: int, clients: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT=str(port), SERVICE_RATE_LIMIT="0")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as probe:
            while True:
                try:
                    async with probe.get(f"http://127.0.0.1:{port}/health") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.005)
        boot_ms = (time.perf_counter() - started) * 1000
        key = (home / "credentials").read_text().split("=", 1)[1].strip()
        headers = {"Authorization": f"Bearer {key}"}
        print(f"daemon start -> first healthy response: {boot_ms:.0f} ms")
        for name, connector, base in (
            ("unix", aiohttp.UnixConnector(path=str(home / "svcd.sock"), limit=clients), "http://svcd"),
            ("tcp", aiohttp.TCPConnector(limit=clients), f"http://127.0.0.1:{port}"),
        ):
            async with aiohttp.ClientSession(connector=connector) as session:
                async with session.post(f"{base}/v1/specs", json={"name": "bench", "yaml": SPEC}, headers=headers) as r:
                    spec_id = (await r.json())["id"]
                await hammer(session, f"{base}/v1/specs/{spec_id}", headers, 200, clients)  # warm-up
                t0 = time.perf_counter()
                lat = await hammer(session, f"{base}/v1/specs/{spec_id}", headers, requests, clients)
                wall = time.perf_counter() - t0
            print(
                f"GET /v1/specs/{{id}} over {name:4s} x{clients} clients: p50 {statistics.median(lat):.2f} ms"
                f"  p99 {percentile(lat, 99):.2f} ms  ({requests / wall:.0f} req/s, n={requests})"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.clients))
