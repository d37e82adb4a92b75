"""Benchmark: what the grader's isolation costs (daemon/sandbox/toolset.py, verifier.py). Prints
numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_grader [--runs 8]

Three variants of a trivial run (cli agent `echo 42 > answer.txt`, pooled sandboxes so boot is
small), interleaved so that drift hits them alike:

- reference: a file_content check only (read on the host: no command in a container, no diff);
- agent: the same answer checked by `command_exit` in the agent's container (the engine's diff is
  read for tampering, the check runs with the toolset's shell and timeout);
- clean: the same check with `isolation: clean` (a fresh verifier container per check).

Each line gives the median run wall time and checks time, and the extra wall time over the
reference as a share of the reference run.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import yaml

from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.runs import wait_run

BASE = {
    "version": 1, "base": PYTHON, "task": {"prompt": "answer"},
    "agent": {"type": "cli", "binary": "sh", "args": ["-c", "echo 42 > answer.txt"], "timeout": "30s"},
}
VARIANTS = {
    "reference": {"answer": {"check": {"type": "file_content", "path": "answer.txt", "contains": "42"}}},
    "agent": {"answer": {"check": {"type": "command_exit", "command": 'test "$(cat answer.txt)" = 42'}}},
    "clean": {"answer": {"check": {"type": "command_exit", "command": 'test "$(cat answer.txt)" = 42',
                                   "isolation": "clean"}}},
}


def plain_exec_ms(runs: int) -> float:
    """The check's command as one `docker exec sh -c` in a running container (what a check cost
    before the toolset and the tamper check): median ms."""
    import docker

    client = docker.from_env()
    container = client.containers.run(PYTHON, ["sleep", "300"], detach=True, working_dir="/workspace")
    try:
        container.exec_run(["sh", "-c", "mkdir -p /workspace && echo 42 > /workspace/answer.txt"])
        times = []
        for _ in range(runs * 2):
            started = time.perf_counter()
            container.exec_run(["sh", "-c", 'test "$(cat answer.txt)" = 42'], workdir="/workspace")
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)
    finally:
        container.remove(force=True)


async def pool_full(api, timeout: float = 120) -> None:
    """Each measured run starts from a full pool (the refill after a claim runs in the background)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, health = await api.get("/v1/health")
        pooled = health["sandbox_pool"]["pooled"]
        if pooled and max(pooled.values()) >= 1:
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"the pool did not fill within {timeout:g} s")


async def bench(runs: int) -> None:
    api = await start_api(pool_size=1)
    walls: dict[str, list[float]] = {name: [] for name in VARIANTS}
    checks: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        for name, invariants in VARIANTS.items():
            doc = {**BASE, "id": f"bench-grader-{name}", "invariants": invariants}
            await api.post("/v1/specs", json={"name": doc["id"], "yaml": yaml.safe_dump(doc)})
        for i in range(runs + 1):
            for name in VARIANTS:
                if i or name != "reference":  # the pool learns the shape from the first run
                    await pool_full(api)
                started = time.perf_counter()
                _, queued = await api.post("/v1/runs", json={"spec_id": f"bench-grader-{name}"})
                run = await wait_run(api, queued["id"])
                wall = (time.perf_counter() - started) * 1000
                assert run["status"] == "passed", run
                if i:  # the first round warms the pool and the toolset copy
                    walls[name].append(wall)
                    checks[name].append(run["timings"].get("checks_ms", 0))
    finally:
        await stop_api(api)
    plain = await asyncio.to_thread(plain_exec_ms, runs)
    reference = statistics.median(walls["reference"])
    print(f"grader isolation ({runs} runs of each, interleaved, pooled sandboxes)")
    print(f"  {'variant':<10} {'run wall p50':>14} {'checks p50':>12} {'extra vs reference':>20}")
    for name in VARIANTS:
        wall = statistics.median(walls[name])
        extra = wall - reference
        print(f"  {name:<10} {wall:11.0f} ms {statistics.median(checks[name]):9.0f} ms "
              f"{extra:9.0f} ms ({extra / reference:+.1%})")
    grader = statistics.median(checks["agent"]) - plain
    print(f"  the same check as one plain `docker exec` (round 2's way, no tamper check): {plain:.0f} ms")
    print(f"  the grader's own cost in the agent container (checks p50 - plain exec): {grader:.0f} ms "
          f"= {grader / reference:.1%} of the reference run's wall time")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    asyncio.run(bench(parser.parse_args().runs))


if __name__ == "__main__":
    main()
