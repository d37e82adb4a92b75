"""Benchmark: experiment throughput and per-scenario overhead. Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_scheduler [--replicas 100] [--concurrency 1,2,4] [--fake-only]

1. ``docker run`` baseline: the median wall time of a plain ``docker run --rm`` of the stock python
   image running the same one-line agent (what a container costs on its own).
2. Scheduler only: the same number of scenarios through the real app, store and scheduler with an
   in-process no-op scenario function (the scheduler's seam): pure bookkeeping cost per scenario.
3. Real engine: one experiment of N replicas of a trivial spec at each concurrency, through the
   real runner (sandbox boot, agent, scoring, teardown). Reports scenarios per minute, mean wall per
   scenario, and the overhead per scenario beyond the plain ``docker run`` baseline.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from aiohttp.test_utils import TestClient, TestServer

from daemon.app import create_app
from daemon.config import Settings
from tests.bench.experiments import admin_headers, finished, launch
from tests.support.fake_runs import fake_outcome
from tests.support.images import PYTHON
from daemon.appkeys import RUN_SCENARIO

IMAGE = PYTHON
AGENT = "echo ok > ok.txt"


def spec(replicas: int) -> str:
    return yaml.safe_dump({
        "version": 1, "id": "bench", "base": IMAGE, "task": {"prompt": "write ok.txt"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", AGENT], "timeout": "60s"},
        "invariants": {"ok": {"check": {"type": "file_exists", "path": "ok.txt"}}},
        "parallelism": {"replicas": replicas}, "resources": {"timeout": "5m"},
    }, sort_keys=False)


def docker_run_baseline(samples: int = 7) -> float:
    subprocess.run(["docker", "run", "--rm", IMAGE, "true"], capture_output=True, check=True)  # warm
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "-w", "/tmp", IMAGE, "sh", "-c", AGENT], capture_output=True, check=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def noop_scenario(app, request):
    return fake_outcome(request, score=1.0, duration_ms=0)


async def run_experiment(replicas: int, concurrency: int, fake: bool) -> dict:
    home = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
    os.environ["SERVICE_MAX_CONCURRENT_RUNS"] = str(max(4, concurrency))
    # one tenant here: it may use every slot (the per-tenant cap defaults to half of them)
    settings = Settings(home=home, socket_path=home / "svcd.sock", port=0, max_running_per_tenant=max(4, concurrency))
    app = create_app(settings)
    if fake:
        app[RUN_SCENARIO] = noop_scenario
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        headers = admin_headers(settings)
        experiment_id, started = await launch(client, headers, "bench", spec(replicas), concurrency)
        results = await finished(client, headers, experiment_id, 0.05 if fake else 0.25)
        elapsed = time.perf_counter() - started
        runs = [r for s in results["scenarios"] for r in s["runs"]]
        walls = [r["wall_ms"] for r in runs if r["wall_ms"] is not None]
        durations = [r["duration_ms"] for r in runs if r["duration_ms"] is not None]
        return {
            "elapsed_s": elapsed,
            "passed": sum(r["status"] == "passed" for r in runs),
            "runs": len(runs),
            "per_min": len(runs) / elapsed * 60,
            "mean_wall_ms": statistics.mean(walls) if walls else 0.0,
            "p95_wall_ms": results["metrics"]["p95_wall_ms"],
            "mean_runner_ms": statistics.mean(durations) if durations else 0.0,
        }
    finally:
        await client.close()
        shutil.rmtree(home, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--fake-only", action="store_true", help="skip Docker: scheduler bookkeeping only")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"cpus: {os.cpu_count()}  replicas per experiment: {args.replicas}")

    print("\nscheduler only (no-op scenario function, real app + store + scheduler):")
    for c in levels:
        r = await run_experiment(args.replicas, c, fake=True)
        print(f"  concurrency {c}: {r['runs']} scenarios in {r['elapsed_s']:.2f}s = {r['per_min']:.0f}/min,"
              f" {r['elapsed_s'] / r['runs'] * 1000:.1f} ms bookkeeping per scenario")
    if args.fake_only:
        return

    baseline = await asyncio.to_thread(docker_run_baseline)
    print(f"\nplain `docker run --rm {IMAGE} sh -c '{AGENT}'`: median {baseline:.0f} ms")
    print("\nreal engine (sandbox boot + agent + scoring + teardown per scenario):")
    for c in levels:
        r = await run_experiment(args.replicas, c, fake=False)
        print(f"  concurrency {c}: {r['passed']}/{r['runs']} passed in {r['elapsed_s']:.1f}s = {r['per_min']:.1f} scenarios/min;"
              f" mean wall {r['mean_wall_ms']:.0f} ms (p95 {r['p95_wall_ms']}), runner {r['mean_runner_ms']:.0f} ms,"
              f" scheduler {r['mean_wall_ms'] - r['mean_runner_ms']:.0f} ms;"
              f" overhead vs docker run {r['mean_wall_ms'] - baseline:+.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
