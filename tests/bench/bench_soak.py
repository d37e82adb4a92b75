"""Soak: N trivial runs at concurrency 4 against a real `svcd` subprocess with the warm pool, watching
for leaks. Every 100 runs it prints the daemon's RSS, open file descriptors, the engine objects
labelled with its id (the sandboxes in flight and pooled included), and the store's size (svc.db plus
its WAL); at the end the per-run wall time
of the first and last 100 runs, and for each figure whether it stayed flat within 10% (the first
sample after warm-up, run 200, against the last; the store grows with the runs it keeps, so it
is judged per run; only growth counts against flat). `make soak`; not in CI.

    SOAK_RUNS=2000 SOAK_CONCURRENCY=4 .venv/bin/python -m tests.bench.bench_soak
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import time
from pathlib import Path

import docker
import psutil
import yaml

from tests.support.homes import short_home
from tests.support.images import PYTHON
from tests.support.procs import SvcdProcess

RUNS = int(os.environ.get("SOAK_RUNS", "2000"))
CONCURRENCY = int(os.environ.get("SOAK_CONCURRENCY", "4"))
EVERY = 100
SPEC = {
    "version": 1, "id": "soak", "base": PYTHON, "task": {"prompt": "write ok.txt"},
    "agent": {"type": "cli", "binary": "sh", "args": ["-c", "echo ok > ok.txt"], "timeout": "60s"},
    "invariants": {"ok": {"check": {"type": "file_exists", "path": "ok.txt"}}},
    "resources": {"timeout": "5m"},
}


def sample(proc: psutil.Process, engine: docker.APIClient, daemon_id: str, home: Path) -> dict[str, float]:
    label = {"label": f"svc.daemon={daemon_id}"}
    objects = (len(engine.containers(all=True, filters=label)) + len(engine.networks(filters=label))
               + len(engine.volumes(filters=label).get("Volumes") or []))
    store = sum(p.stat().st_size for p in home.glob("svc.db*") if p.is_file())
    return {"rss_mib": proc.memory_info().rss / 2**20, "fds": float(proc.num_fds()), "engine_objects": float(objects),
            "store_mib": store / 2**20}


async def one_run(daemon: SvcdProcess) -> tuple[float, str]:
    started = time.perf_counter()
    while True:  # a 429 (the per-key rate limit) waits and asks again
        status, run = await daemon.request("POST", "/v1/runs", {"spec_id": "soak"})
        if status == 202:
            break
        assert status == 429, run
        await asyncio.sleep(0.5)
    while True:
        await asyncio.sleep(0.25)
        status, body = await daemon.request("GET", f"/v1/runs/{run['id']}")
        if status == 200 and body["status"] in ("passed", "failed", "errored"):
            return time.perf_counter() - started, body["status"]


def flat(first: float, last: float) -> str:
    """A leak is growth: falling (the warm-up's cost gone, fewer runs in flight at the sample) is flat."""
    if first == 0:
        return "flat" if last == 0 else f"NOT flat ({first:g} -> {last:g})"
    change = (last - first) / first
    return f"{'flat' if change <= 0.10 else 'NOT flat'} ({change:+.1%})"


async def main() -> None:
    home = short_home("svc-soak-")
    daemon = SvcdProcess(home, {"SERVICE_POOL_SIZE": "4", "SERVICE_MAX_SANDBOXES": "16", "SERVICE_RATE_LIMIT": "200"})
    await daemon.start()
    try:
        status, body = await daemon.request("POST", "/v1/specs", {"name": "soak", "yaml": yaml.safe_dump(SPEC)})
        assert status == 201, body
        engine = docker.APIClient(timeout=60)
        proc = psutil.Process(daemon.proc.pid if daemon.proc else 0)
        import sqlite3

        with sqlite3.connect(home / "svc.db") as db:
            daemon_id = db.execute("SELECT value FROM daemon_meta WHERE key='daemon_id'").fetchone()[0]
        walls: list[float] = []
        statuses: dict[str, int] = {}
        samples: dict[int, dict[str, float]] = {}
        gate = asyncio.Semaphore(CONCURRENCY)
        done = 0
        begun = time.monotonic()
        print(f"soak: {RUNS} runs at concurrency {CONCURRENCY}, warm pool 4, daemon pid {proc.pid}")
        print(f"{'runs':>6} {'rss MiB':>8} {'fds':>5} {'objects':>8} {'store MiB':>10} {'elapsed s':>10}")

        async def worker(index: int) -> None:
            nonlocal done
            async with gate:
                wall, status = await one_run(daemon)
            walls.append(wall)
            statuses[status] = statuses.get(status, 0) + 1
            done += 1
            if done % EVERY == 0 or done == RUNS:
                s = samples[done] = await asyncio.to_thread(sample, proc, engine, daemon_id, home)
                print(f"{done:>6} {s['rss_mib']:>8.1f} {s['fds']:>5.0f} {s['engine_objects']:>8.0f} "
                      f"{s['store_mib']:>10.2f} {time.monotonic() - begun:>10.0f}", flush=True)

        await asyncio.gather(*(worker(i) for i in range(RUNS)))
        head, tail = walls[:EVERY], walls[-EVERY:]
        print(f"statuses: {statuses}")
        print(f"per-run wall: first {len(head)} median {statistics.median(head):.2f}s, "
              f"last {len(tail)} median {statistics.median(tail):.2f}s -> {flat(statistics.median(head), statistics.median(tail))}")
        keys = sorted(samples)
        first = samples[min((k for k in keys if k >= 2 * EVERY), default=keys[0])]
        last = samples[keys[-1]]
        first_n = min((k for k in keys if k >= 2 * EVERY), default=keys[0])
        for name in ("rss_mib", "fds", "engine_objects"):
            print(f"{name}: {first[name]:.1f} at run {first_n} -> {last[name]:.1f} at run {keys[-1]}: "
                  f"{flat(first[name], last[name])}")
        per_run = (first["store_mib"] / first_n, last["store_mib"] / keys[-1])
        print(f"store per run: {per_run[0] * 1024:.1f} KiB -> {per_run[1] * 1024:.1f} KiB: {flat(*per_run)}")
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill(signal.SIGTERM)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
