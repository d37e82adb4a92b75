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
    reference = statistics.median(walls["reference"])
    print(f"grader isolation ({runs} runs of each, interleaved, pooled sandboxes)")
    print(f"  {'variant':<10} {'run wall p50':>14} {'checks p50':>12} {'extra vs reference':>20}")
    for name in VARIANTS:
        wall = statistics.median(walls[name])
        extra = wall - reference
        print(f"  {name:<10} {wall:11.0f} ms {statistics.median(checks[name]):9.0f} ms "
              f"{extra:9.0f} ms ({extra / reference:+.1%})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    asyncio.run(bench(parser.parse_args().runs))


if __name__ == "__main__":
    main()
