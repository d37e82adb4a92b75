"""Benchmark: wall time of a run of a trivial spec (cli agent `echo`, one file_exists invariant, no
services), split into every part of its time budget as the runner measures them (Run.timings: queue,
boot, task, agent, leftovers, snapshot, checks, forbidden, exports, teardown), beside a plain
`docker run --rm` of the same image and command (the floor a sandbox cannot beat; the ratio is
printed). Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_runs [--runs 10]

A second table does the same for the quickstart-like spec with a postgres service.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import time

import yaml

from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.runs import wait_run

IMAGE = PYTHON
TRIVIAL = {
    "version": 1, "id": "bench-trivial", "base": IMAGE, "task": {"prompt": "write out.txt"},
    "agent": {"type": "cli", "binary": "sh", "args": ["-c", "echo hi > out.txt"], "timeout": "30s"},
    "invariants": {"wrote": {"check": {"type": "file_exists", "path": "out.txt"}}},
}
WITH_DB = {
    **TRIVIAL, "id": "bench-postgres",
    "services": [{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}],
    "fixtures": [{"service": "db", "sql": "CREATE TABLE t (id int); INSERT INTO t VALUES (1);"}],
    "invariants": {
        "wrote": {"check": {"type": "file_exists", "path": "out.txt"}},
        "row": {"check": {"type": "sql", "service": "db", "query": "SELECT count(*) FROM t", "expect_scalar": 1}},
    },
}
PHASES = tuple((key[:-3], (key,)) for key in ("queue_ms", "boot_ms", "claim_ms", "setup_ms", "task_ms", "agent_ms",
                                              "leftovers_ms", "snapshot_ms", "checks_ms", "forbidden_ms", "exports_ms",
                                              "teardown_ms"))


def docker_run_ms() -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", IMAGE, "sh", "-c", "echo hi > /tmp/out.txt"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def row(name: str, values: list[float]) -> str:
    return f"  {name:<22} median {statistics.median(values):8.0f} ms   min {min(values):8.0f}   max {max(values):8.0f}"


async def bench(doc: dict, runs: int) -> None:
    api = await start_api()
    try:
        await api.post("/v1/specs", json={"name": doc["id"], "yaml": yaml.safe_dump(doc)})
        walls: list[float] = []
        phases: dict[str, list[float]] = {name: [] for name, _ in PHASES}
        plain: list[float] = []
        for _ in range(runs):
            started = time.perf_counter()
            response, queued = await api.post("/v1/runs", json={"spec_id": doc["id"]})
            run = await wait_run(api, queued["id"])
            walls.append((time.perf_counter() - started) * 1000)
            assert run["status"] == "passed", run
            for name, keys in PHASES:
                phases[name].append(sum(run["timings"].get(k, 0) for k in keys))
            plain.append(await asyncio.to_thread(docker_run_ms))
        print(f"{doc['id']} ({runs} runs, one at a time)")
        print(row("run wall (API)", walls))
        for name, values in phases.items():
            if any(values):
                print(row(f"  {name}", values))
        print(row("plain docker run --rm", plain))
        print(f"  run wall / plain docker run: {statistics.median(walls) / statistics.median(plain):.2f}x")
    finally:
        await stop_api(api)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    if shutil.which("docker") is None:
        raise SystemExit("needs the docker CLI for the plain `docker run` comparison")
    asyncio.run(bench(TRIVIAL, args.runs))
    asyncio.run(bench(WITH_DB, max(3, args.runs // 2)))


if __name__ == "__main__":
    main()
