"""Benchmark: the same N trivial samples through svc, the docker-py floor and Inspect AI's docker
sandbox, on this engine, in one run. Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_inspect [--inspect-python PATH] [--runs 24:2,48:4]

Each sample, on every side: a sandbox of the stock python image, one exec that writes ok.txt, one
check that it exists. svc runs one experiment of N replicas of bench_scale's spec at concurrency C
(its network, firewall, audit, proxy and teardown included); the floor is bench_scale's docker-py
loop; Inspect runs a Task of N samples (a solver that execs the write, a scorer that execs the
test, `mockllm/model`, no model call) with max_samples = max_sandboxes = C, its wall time measured
around `inspect_ai.eval` (the compose project set-up included, the interpreter's start not).

Inspect lives in a side virtualenv (`--inspect-python`, else $SVC_INSPECT_PYTHON): `python3 -m venv
/tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect-ai`. Its docker sandbox needs the
`docker compose` v2 plugin (Debian trixie's `docker-compose` package: its binary copied to
/usr/local/lib/docker/cli-plugins/) and asks for Docker Engine >= 24.0.6; Debian bookworm's engine is
20.10, so the sample script skips that version check (the calls it makes work on 20.10). Without
Inspect or compose the bench says so and prints the svc and floor figures alone.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.bench_scale import experiment, floor_per_min
from tests.support.images import PYTHON

COMPOSE = f"""services:
  default:
    image: {PYTHON}
    command: ["sleep", "infinity"]
    init: true
    network_mode: none
    x-local: true
"""

SAMPLES = '''
import sys, time
import inspect_ai.util._sandbox.docker.prereqs as prereqs
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox


async def engine_ok(version: str = "") -> None:  # Debian bookworm's engine is 20.10; Inspect asks for 24.0.6
    return None


prereqs.validate_docker_engine = engine_ok


@solver
def write_file():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await sandbox().exec(["sh", "-c", "echo ok > ok.txt"])
        return state
    return solve


@scorer(metrics=[accuracy()])
def file_exists():
    async def score(state: TaskState, target: Target) -> Score:
        result = await sandbox().exec(["test", "-f", "ok.txt"])
        return Score(value=CORRECT if result.returncode == 0 else INCORRECT)
    return score


n, c, compose, logs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
task = Task(dataset=[Sample(input="write ok.txt", target="ok", id=i) for i in range(n)], solver=write_file(),
            scorer=file_exists(), sandbox=("docker", compose))
started = time.perf_counter()
log = inspect_eval(task, model="mockllm/model", max_samples=c, max_sandboxes=c, display="none", log_dir=logs)[0]
elapsed = time.perf_counter() - started
correct = sum(1 for s in (log.samples or []) if s.scores and list(s.scores.values())[0].value == CORRECT)
print(f"{elapsed:.3f} {correct} {log.status}")
'''


def inspect_missing(python: str | None) -> str | None:
    """Why Inspect cannot run here, or None."""
    if not python or not Path(python).exists():
        return "no Inspect interpreter (give --inspect-python or $SVC_INSPECT_PYTHON)"
    probe = subprocess.run([python, "-c", "import inspect_ai; print(inspect_ai.__version__)"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{python} cannot import inspect_ai"
    compose = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True)
    if compose.returncode != 0:
        return "no `docker compose` v2 plugin (Inspect's docker sandbox needs it)"
    return None


def inspect_version(python: str) -> str:
    return subprocess.run([python, "-c", "import inspect_ai; print(inspect_ai.__version__)"], capture_output=True,
                          text=True).stdout.strip()


def inspect_per_min(python: str, samples: int, concurrency: int) -> tuple[float, int, str]:
    """(samples/min, samples scored correct, the eval's status) of one Inspect eval."""
    work = Path(tempfile.mkdtemp(prefix="svc-bench-inspect-"))
    try:
        (work / "compose.yaml").write_text(COMPOSE)
        (work / "samples.py").write_text(SAMPLES)
        done = subprocess.run([python, str(work / "samples.py"), str(samples), str(concurrency), str(work / "compose.yaml"),
                               str(work / "logs")], capture_output=True, text=True, cwd=work, timeout=1800)
        if done.returncode != 0 or not done.stdout.strip():
            raise RuntimeError(f"Inspect eval failed: {(done.stderr or done.stdout)[-600:]}")
        elapsed, correct, status = done.stdout.split()[-3:]
        return samples / float(elapsed) * 60, int(correct), status
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inspect-python", default=os.environ.get("SVC_INSPECT_PYTHON"))
    parser.add_argument("--runs", default="24:2,48:4", help="N:C pairs (samples : concurrency)")
    args = parser.parse_args()
    pairs = [tuple(int(x) for x in pair.split(":")) for pair in args.runs.split(",")]
    missing = inspect_missing(args.inspect_python)
    print(f"cpus: {os.cpu_count()}  python: {sys.version.split()[0]}  "
          + (f"Inspect AI: not run ({missing})" if missing else f"Inspect AI {inspect_version(args.inspect_python)}"))
    print(f"{'trivial samples/min':22} {'svc':>8} {'floor':>8} {'Inspect':>8} {'svc/floor':>10} {'svc/Inspect':>12}")
    for samples, concurrency in pairs:
        svc = await experiment(samples, concurrency)
        floor = await asyncio.to_thread(floor_per_min, samples, concurrency)
        line = f"{f'  N={samples}, C={concurrency}':22} {svc['per_min']:8.1f} {floor:8.1f}"
        if missing:
            line += f" {'-':>8} {svc['per_min'] / floor:9.2f}x {'-':>12}"
        else:
            theirs, correct, status = await asyncio.to_thread(inspect_per_min, args.inspect_python, samples, concurrency)
            line += f" {theirs:8.1f} {svc['per_min'] / floor:9.2f}x {svc['per_min'] / theirs:11.2f}x"
            line += f"   (svc {svc['passed']}/{svc['runs']} passed, Inspect {correct}/{samples} correct, {status})"
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
