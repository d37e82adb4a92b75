"""A real svcd subprocess, SIGKILLed while an experiment's scenarios are inside their sandboxes,
restarts and finishes the experiment: every scenario run exactly once to completion, the interrupted
ones retried (same seed, new run id), none lost or duplicated."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.homes import short_home
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for_sync

REPO = Path(__file__).resolve().parents[2]


def svc(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0", SERVICE_MAX_CONCURRENT_RUNS="2")
    return subprocess.run([sys.executable, "-m", "client.cli", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def get_json(home: Path, *args: str) -> dict[str, Any]:
    done = svc(home, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigkilled_daemon_restarts_and_finishes_every_scenario(stock_images, tmp_path):
    home = short_home()
    try:
        spec = tmp_path / "slow.yaml"
        doc = tiny_spec("slow", agent="sleep 3; echo ok > ok.txt", replicas=3, matrix=[{"mode": "a"}, {"mode": "b"}])
        spec.write_text(yaml.safe_dump(doc, sort_keys=False))
        assert svc(home, "daemon", "start").returncode == 0
        created = get_json(home, "eval", "run", str(spec), "--no-wait")
        experiment_id = created["id"]
        def two_running():  # runs are inside their sandboxes
            results = get_json(home, "eval", "get", experiment_id)
            states = [r["status"] for s in results["scenarios"] for r in s["runs"]]
            return results if states.count("running") >= 2 else None
        results = wait_for_sync(two_running, timeout=60, what="two runs in their sandboxes", interval=0.3)
        pid = int((home / "svcd.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        wait_for_sync(lambda: not pid_alive(pid), what="the killed daemon to exit")
        interrupted = {r["seed"] for s in results["scenarios"] for r in s["runs"] if r["status"] == "running"}

        assert svc(home, "daemon", "start").returncode == 0
        def settled():
            results = get_json(home, "eval", "get", experiment_id)
            return results if results["status"] != "running" else None
        results = wait_for_sync(settled, timeout=180, what="the experiment to finish", interval=0.5)
        assert results["status"] == "completed" and results["completed_runs"] == 6
        runs = [r for s in results["scenarios"] for r in s["runs"]]
        assert len(runs) == 6 and len({r["seed"] for r in runs}) == 6  # none lost, none duplicated
        assert all(r["status"] == "passed" for r in runs), [(r["status"], r["error"]) for r in runs]
        retried = [r for r in runs if r["previous_run_ids"]]
        assert {r["seed"] for r in retried} == interrupted
        assert all(r["attempts"] == 2 and len(r["previous_run_ids"]) == 1 for r in retried)
        assert [s["verdict"] for s in results["scenarios"]] == ["pass", "pass"]
        # The interrupted attempts' run rows were closed by the runs service (daemon_restart).
        for r in retried:
            old = get_json(home, "runs", "get", r["previous_run_ids"][0])
            assert old["status"] == "errored"
    finally:
        svc(home, "daemon", "stop")
        import shutil

        shutil.rmtree(home, ignore_errors=True)
