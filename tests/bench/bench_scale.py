"""Benchmark: trivial scenarios per minute against a docker-py floor, and a 1,000-run experiment
with the daemon's memory watched. Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_scale [--replicas 40] [--concurrency 1,2,4] [--scale-runs 1000]

1. Throughput: one experiment of N replicas of a trivial spec (cli agent `echo`, one file_exists
   invariant, no services) at each concurrency through the real daemon app, beside the docker-py
   floor measured in the same run at the same concurrency: per scenario an internal network, one
   container, two execs (the agent command and the check) and the removal of both, nothing else.
2. Scale (`--scale-runs`, 0 skips it): an experiment of 24 replicas, then one of that many, at the
   highest concurrency, and the per-run cost of the large one against the small one (the cost per
   run must not grow with the experiment); the daemon process's RSS printed before, every tenth of
   the runs, and after; then how many runs were stored, and (tracemalloc, `--trace-frames`, off
   unless given: it slows the daemon) the Python heap's
   growth from before the first run to after the last teardown per run, and from the first tenth
   (past one-off warm-up: imports, thread and connection pools) to the end by allocation site.
   `--replicas 0` skips the throughput part.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import tempfile
import time
import tracemalloc
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import psutil
import yaml
from aiohttp.test_utils import TestClient, TestServer

from daemon.app import create_app
from daemon.config import Settings
from tests.bench.experiments import admin_headers, finished, launch
from tests.support.images import PYTHON

AGENT = "echo ok > ok.txt"
SMALL_RUNS = 24  # the experiment size the scale part compares the per-run cost with


def spec(replicas: int) -> str:
    return yaml.safe_dump({
        "version": 1, "id": "bench-scale", "base": PYTHON, "task": {"prompt": "write ok.txt"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", AGENT], "timeout": "60s"},
        "invariants": {"ok": {"check": {"type": "file_exists", "path": "ok.txt"}}},
        "parallelism": {"replicas": replicas}, "resources": {"timeout": "5m"},
    }, sort_keys=False)


def floor_scenario(api) -> None:
    """What any sandboxed scenario needs at least, straight through docker-py."""
    name = f"svc-bench-floor-{uuid.uuid4().hex[:10]}"
    api.create_network(name, driver="bridge", internal=True, labels={"svc.test": "1"})
    try:
        host = api.create_host_config(network_mode=name, init=True)
        cid = api.create_container(PYTHON, ["sleep", "600"], host_config=host, working_dir="/tmp",
                                   labels={"svc.test": "1"}, detach=True)["Id"]
        try:
            api.start(cid)
            for argv in (["sh", "-c", AGENT], ["test", "-f", "ok.txt"]):
                api.exec_start(api.exec_create(cid, argv)["Id"])
        finally:
            api.remove_container(cid, force=True)
    finally:
        api.remove_network(name)


def floor_per_min(scenarios: int, concurrency: int) -> float:
    api = docker.from_env(max_pool_size=concurrency + 4).api
    floor_scenario(api)  # warm
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: floor_scenario(api), range(scenarios)))
    return scenarios / (time.perf_counter() - started) * 60


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1024**2


def traced_now() -> int:
    """Live traced bytes: cyclic garbage collected first, so only what is still referenced counts."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def heap_snapshot() -> tracemalloc.Snapshot:
    """The traced heap (after a collection) without tracemalloc's own bookkeeping."""
    gc.collect()
    return tracemalloc.take_snapshot().filter_traces([
        tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")])


def print_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, runs: int, top: int = 12) -> None:
    """Heap growth grouped by where it was allocated and which of our frames (daemon/) asked for it."""
    sites: dict[str, list[int]] = {}
    names: dict[tuple[str, int], str] = {}

    def where(frame: tracemalloc.Frame) -> str:
        key = (frame.filename, frame.lineno)
        if key not in names:
            path = Path(frame.filename)
            names[key] = f"{path.parent.name}/{path.name}:{frame.lineno}"
        return names[key]

    for stat in after.compare_to(before, "traceback"):
        if not stat.size_diff:
            continue
        frames = stat.traceback  # oldest call first
        ours = next((fr for fr in reversed(frames) if "/daemon/" in fr.filename), None)
        key = where(frames[-1]) + (f" <- {where(ours)}" if ours is not None and ours != frames[-1] else "")
        site = sites.setdefault(key, [0, 0])
        site[0] += stat.size_diff
        site[1] += stat.count_diff
    total = sum(size for size, _ in sites.values())
    print(f"  traced heap growth: {total / 1024:+.0f} KiB = {total / max(1, runs) / 1024:.2f} KiB per run; top sites:")
    for key, (size, count) in sorted(sites.items(), key=lambda item: item[1][0], reverse=True)[:top]:
        print(f"    {size / 1024:+9.1f} KiB {count:+7d} blocks  {key}")


async def experiment(replicas: int, concurrency: int, watch_rss: bool = False) -> dict:
    home = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
    os.environ["SERVICE_MAX_CONCURRENT_RUNS"] = str(max(4, concurrency))
    # one tenant here: it may use every slot (the per-tenant cap defaults to half of them)
    settings = Settings(home=home, socket_path=home / "svcd.sock", port=0, max_running_per_tenant=max(4, concurrency))
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    try:
        headers = admin_headers(settings)
        tracing = watch_rss and tracemalloc.is_tracing()
        traced_before = traced_now() if tracing else 0
        warm: tuple[tracemalloc.Snapshot, int] | None = None  # after the first tenth: past one-off warm-up
        if watch_rss:
            print(f"  RSS before: {rss_mb():.0f} MiB")
        experiment_id, started = await launch(client, headers, "bench-scale", spec(replicas), concurrency)
        marks: list[tuple[int, float]] = []  # (runs done, when) at each tenth
        every = max(10, replicas // 10)
        next_report = every
        while True:  # the light list row: polling the full results would grow this process itself
            # through the plain session: TestClient.get keeps every response until it closes
            async with client.session.get(client.make_url("/v1/experiments?spec_id=bench-scale"), headers=headers) as response:
                record = (await response.json())["items"][0]
            done = record["completed_runs"] or 0
            if watch_rss and done >= next_report:
                marks.append((done, time.perf_counter()))
                print(f"  RSS after {done:>5} runs: {rss_mb():.0f} MiB  ({marks[-1][1] - started:.0f}s)")
                next_report = (done // every + 1) * every
                if tracing and warm is None:
                    warm = (heap_snapshot(), done)
            if record["status"] != "running":
                break
            await asyncio.sleep(0.5)
        elapsed = time.perf_counter() - started
        if watch_rss:  # measured before this process reads the full results (they are big)
            await asyncio.sleep(2)  # background teardowns finish
            print(f"  RSS after: {rss_mb():.0f} MiB")
        if tracing:
            grown = traced_now() - traced_before
            print(f"  traced heap before -> after: {grown / 1024:+.0f} KiB = {grown / max(1, done) / 1024:.2f} KiB per run")
            if warm is not None and done > warm[1]:
                print(f"  from run {warm[1]} on:")
                print_growth(warm[0], heap_snapshot(), done - warm[1])
        results = await finished(client, headers, experiment_id, 0.5)
        if len(marks) >= 3:  # the second tenth (past the pool filling) against the last: no growth with the runs stored
            second = (marks[1][1] - marks[0][1]) / (marks[1][0] - marks[0][0]) * 1000
            last = (marks[-1][1] - marks[-2][1]) / (marks[-1][0] - marks[-2][0]) * 1000
            print(f"  per-run cost over the second tenth {second:.0f} ms, over the last {last:.0f} ms: {last / second:.3f}x")
        runs = [r for s in results["scenarios"] for r in s["runs"]]
        return {"elapsed_s": elapsed, "runs": len(runs), "passed": sum(r["status"] == "passed" for r in runs),
                "per_min": len(runs) / elapsed * 60}
    finally:
        await client.close()
        shutil.rmtree(home, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=40, help="scenarios per throughput experiment")
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--scale-runs", type=int, default=1000, help="runs of the scale experiment (0: skip)")
    parser.add_argument("--trace-frames", type=int, default=0,
                        help="tracemalloc frames per site in the scale part (0: off; on, it slows the daemon)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"cpus: {os.cpu_count()}  scenarios per measurement: {args.replicas}\n")
    if args.replicas:
        print(f"{'trivial scenarios/min':28} {'svc':>8} {'docker-py floor':>16} {'ratio':>7}")
    for c in levels if args.replicas else []:
        engine = await experiment(args.replicas, c)
        floor = await asyncio.to_thread(floor_per_min, args.replicas, c)
        print(f"{'  concurrency ' + str(c):28} {engine['per_min']:8.1f} {floor:16.1f} {engine['per_min'] / floor:6.2f}x"
              f"   ({engine['passed']}/{engine['runs']} passed)")
    if args.scale_runs:
        level = max(levels)
        print(f"\nscale: {SMALL_RUNS} runs, then one experiment of {args.scale_runs} runs, at concurrency {level}")
        small = await experiment(SMALL_RUNS, level)
        small_ms = small["elapsed_s"] / max(1, small["runs"]) * 1000
        print(f"  {small['passed']}/{small['runs']} passed in {small['elapsed_s']:.1f}s = {small_ms:.0f} ms per run")
        if args.trace_frames:
            tracemalloc.start(args.trace_frames)  # slows the daemon: the RSS includes tracemalloc's own tables
        result = await experiment(args.scale_runs, level, watch_rss=True)
        large_ms = result["elapsed_s"] / max(1, result["runs"]) * 1000
        print(f"  {result['passed']}/{result['runs']} passed and stored in {result['elapsed_s']:.0f}s"
              f" = {result['per_min']:.1f}/min = {large_ms:.0f} ms per run")
        print(f"  per-run cost, {args.scale_runs} runs / {SMALL_RUNS} runs: {large_ms / small_ms:.3f}x"
              + ("  (tracemalloc on: its overhead is in the larger figure)" if args.trace_frames else ""))

if __name__ == "__main__":
    asyncio.run(main())
