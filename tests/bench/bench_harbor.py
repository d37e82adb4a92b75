"""Benchmark: the same Harbor task directories through Harbor itself and through svc, on this engine,
in one run: each task's oracle (solution/solve.sh) and no-op agent, their rewards and wall times.
Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_harbor [--harbor-root DIR] [--tasks tests/fixtures/harbor]

Harbor 0.26 needs Python >= 3.12 and the `docker compose` v2 plugin; this machine has Python 3.11,
so it runs from a Debian trixie root (`--harbor-root`, else $SVC_HARBOR_ROOT):

    mmdebstrap --variant=apt --include=python3,python3-venv,ca-certificates,docker-cli,docker-compose \\
        trixie /tmp/trixie-root
    (copy the host's resolv.conf, CA bundle and pip.conf in; bind /var/run/docker.sock on ROOT/run/docker.sock)
    chroot /tmp/trixie-root sh -c 'python3 -m venv /opt/harbor && /opt/harbor/bin/pip install harbor==0.26.0'

Per task and side: one warm-up oracle run (image builds are cached from then on), then one oracle
and one no-op run timed around the command (Harbor: `harbor run -p TASK -a oracle|nop -n 1`, its
CLI start included; svc: `svc tasks run TASK --agent oracle|cli:true` against the real daemon app).
Harbor's own trial time (its result.json) is printed beside. Without a Harbor root, the svc figures
are printed alone.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from daemon.app import create_app
from daemon.config import Settings
from tests.bench.experiments import admin_headers

REPO = Path(__file__).resolve().parents[2]
HARBOR = "/opt/harbor/bin/harbor"


def harbor_trial(root: Path, task: str, agent: str) -> tuple[float | None, float, float | None]:
    """(reward, wall seconds of the command, Harbor's own trial seconds) of one trial."""
    jobs = f"/svc-bench-jobs/{task}-{agent}-{time.monotonic_ns()}"
    started = time.perf_counter()
    done = subprocess.run(["chroot", str(root), HARBOR, "run", "-p", f"/svc-bench-tasks/{task}", "-a", agent, "-y",
                           "-o", jobs, "-n", "1", "-q"], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}, cwd="/")
    wall = time.perf_counter() - started
    trials = [p for p in (root / jobs.lstrip("/")).glob("*/*/result.json")]
    if done.returncode != 0 or not trials:
        return None, wall, None
    result = json.loads(trials[0].read_text())
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    trial_s = (datetime.fromisoformat(result["finished_at"]) - datetime.fromisoformat(result["started_at"])).total_seconds()
    return rewards.get("reward"), wall, trial_s


def svc_trial(base_url: str, key: str, task_dir: Path, agent: str) -> tuple[float | None, float]:
    """(score, wall seconds) of `svc tasks run TASK --agent AGENT`."""
    from client.cli import main

    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["--base-url", base_url, "--api-key", key, "tasks", "run", str(task_dir), "--agent", agent, "--poll", "0.2"])
    wall = time.perf_counter() - started
    try:
        rows = json.loads(out.getvalue())["tasks"]
    except (ValueError, KeyError):
        return None, wall
    return rows[0].get("score"), wall


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harbor-root", default=os.environ.get("SVC_HARBOR_ROOT"))
    parser.add_argument("--tasks", default=str(REPO / "tests" / "fixtures" / "harbor"))
    args = parser.parse_args()
    tasks = sorted(p for p in Path(args.tasks).iterdir() if (p / "task.toml").is_file())
    root = Path(args.harbor_root) if args.harbor_root else None
    if root is not None and not (root / HARBOR.lstrip("/")).exists():
        print(f"Harbor: not run (no {HARBOR} under {root})")
        root = None
    if root is not None:
        shutil.rmtree(root / "svc-bench-tasks", ignore_errors=True)
        shutil.copytree(args.tasks, root / "svc-bench-tasks")
    home = Path(tempfile.mkdtemp(prefix="svc-bench-harbor-", dir="/tmp"))
    settings = Settings(home=home, socket_path=home / "svcd.sock", port=0)
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    base_url, key = str(client.make_url("")).rstrip("/"), admin_headers(settings)["Authorization"].split()[-1]
    print(f"{len(tasks)} task(s) from {args.tasks}; Harbor " + ("0.26 (trixie root)" if root else "not run"))
    print(f"{'task':14} {'oracle: svc':>12} {'Harbor':>8} {'no-op: svc':>11} {'Harbor':>8} "
          f"{'oracle s: svc':>14} {'Harbor':>8} {'(trial)':>8}")
    try:
        for task in tasks:
            await asyncio.to_thread(svc_trial, base_url, key, task, "oracle")  # warm: the image is built
            svc_oracle, svc_s = await asyncio.to_thread(svc_trial, base_url, key, task, "oracle")
            svc_nop, _ = await asyncio.to_thread(svc_trial, base_url, key, task, "cli:true")
            line = f"{task.name:14} {fmt(svc_oracle):>12}"
            if root is not None:
                await asyncio.to_thread(harbor_trial, root, task.name, "oracle")
                h_oracle, h_s, h_trial = await asyncio.to_thread(harbor_trial, root, task.name, "oracle")
                h_nop, _, _ = await asyncio.to_thread(harbor_trial, root, task.name, "nop")
                line += f" {fmt(h_oracle):>8} {fmt(svc_nop):>11} {fmt(h_nop):>8} {svc_s:14.1f} {h_s:8.1f} {fmt(h_trial and round(h_trial, 1)):>8}"
            else:
                line += f" {'-':>8} {fmt(svc_nop):>11} {'-':>8} {svc_s:14.1f} {'-':>8} {'-':>8}"
            print(line, flush=True)
    finally:
        await client.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
