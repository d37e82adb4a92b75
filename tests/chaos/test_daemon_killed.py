"""Chaos: svcd is killed (SIGKILL) while a Dockerfile base is being built for an experiment's run, then
started again: the experiment finishes with honest verdicts (the interrupted run retried, never a
`fail`), the store passes its integrity check, and after a clean stop nothing of the daemon is left
on the engine or under SERVICE_HOME's runtime directories. A real svcd subprocess and the real CLI."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support.chaos import integrity, leaked
from tests.support.homes import short_home
from tests.support.images import PYTHON
from tests.support.waiting import wait_for_sync

REPO = Path(__file__).resolve().parents[2]
BUILD_S = 12  # the Dockerfile's RUN step: long enough to be killed inside it


def svc(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0", SERVICE_POOL_SIZE="0")
    return subprocess.run([sys.executable, "-m", "client.cli", *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def get_json(home: Path, *args: str) -> Any:
    done = svc(home, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def write_spec(root: Path) -> Path:
    (root / "env").mkdir()
    # a nonce so no earlier build of this test is in the engine's cache
    (root / "env" / "Dockerfile").write_text(f"FROM {PYTHON}\nRUN echo {os.urandom(6).hex()} > /nonce && sleep {BUILD_S}\n")
    spec = {
        "version": 1, "id": "killed-build", "base": {"build": {"context": "env", "dockerfile": "Dockerfile"}},
        "task": {"prompt": "write ok.txt"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", "test -f /nonce && echo ok > ok.txt"], "timeout": "30s"},
        "invariants": {"wrote_ok": {"check": {"type": "file_exists", "path": "ok.txt"}}},
        "parallelism": {"replicas": 2}, "resources": {"timeout": "5m"},
    }
    path = root / "killed-build.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_the_daemon_killed_during_a_dockerfile_build(stock_images, tmp_path):
    home = short_home()
    try:
        spec = write_spec(tmp_path)
        assert svc(home, "daemon", "start").returncode == 0
        experiment_id = get_json(home, "eval", "run", str(spec), "--no-wait")["id"]

        def building():  # a sandbox of the experiment is booting: its base image is being built
            page = get_json(home, "sandboxes", "list")
            items = page.get("items", page) if isinstance(page, dict) else page
            return [s for s in items if s.get("state") in ("creating", "provisioning") or s.get("status") == "provisioning"] or None
        wait_for_sync(building, timeout=60, what="a sandbox booting on the Dockerfile base", interval=0.3)
        pid = int((home / "svcd.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        wait_for_sync(lambda: not pid_alive(pid), what="the killed daemon to exit")
        with sqlite3.connect(home / "svc.db") as db:
            daemon_id = db.execute("SELECT value FROM daemon_meta WHERE key = 'daemon_id'").fetchone()[0]

        assert svc(home, "daemon", "start").returncode == 0

        def settled():
            results = get_json(home, "eval", "get", experiment_id)
            return results if results["status"] != "running" else None
        results = wait_for_sync(settled, timeout=300, what="the experiment to finish", interval=1.0)
        runs = [r for s in results["scenarios"] for r in s["runs"]]
        earlier = [get_json(home, "runs", "get", old)["status"] for r in runs for old in r["previous_run_ids"]]
    finally:
        svc(home, "daemon", "stop")
    try:
        outcome = (results["status"], [r["status"] for r in runs], "failed" in earlier)
        assert outcome == ("completed", ["passed", "passed"], False), (outcome, earlier)
        assert integrity(home) == "ok"
        assert leaked(daemon_id, home) == {"containers": [], "networks": [], "volumes": [], "dirs": []}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def import_bundle(scenarios: int) -> dict[str, Any]:
    """A baseline bundle of `scenarios` scenarios of one passed run each (the shape svc eval export writes)."""
    from tests.support.specs import spec_yaml

    text = spec_yaml("killed-import")
    run = {"index": 0, "seed": "seed-0", "run_id": "run_exported0", "status": "passed", "verdict": "pass", "score": 1.0,
           "invariant_results": [{"invariant_id": "ok", "name": "ok", "status": "passed", "score": 1.0}], "duration_ms": 12,
           "wall_ms": 20, "cost_usd": 0.0, "error": None, "reason": None, "attempts": 1, "previous_run_ids": [],
           "trace_ids": [], "trajectory_url": None, "reproducer": {"command": "svc runs create x", "inputs": {}, "pins": None},
           "started_at": "2026-11-25T00:00:00Z", "finished_at": "2026-11-25T00:00:01Z"}
    metrics = {"total_runs": scenarios, "passed_runs": scenarios, "failed_runs": 0, "errored_runs": 0, "pass_rate": 1.0,
               "pass_rate_ci": [0.9, 1.0], "total_cost_usd": 0.0, "mean_cost_per_run_usd": 0.0, "mean_wall_ms": 20.0,
               "p95_wall_ms": 20.0, "total_tool_calls": 0, "mean_tool_calls": 0.0, "tool_success_rate": None,
               "side_effect_violations": 0}
    return {
        "format": "svc-baseline-bundle", "version": 1, "exported_at": "2026-11-26T00:00:00Z",
        "spec": {"id": "killed-import", "version": 1, "digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest(), "yaml": text},
        "experiment": {"id": "exp_exported0", "name": "baseline", "status": "completed", "created_at": "2026-11-25T00:00:00Z",
                       "started_at": "2026-11-25T00:00:00Z", "finished_at": "2026-11-25T00:00:02Z", "replicas": 1,
                       "matrix": [{"case": i} for i in range(scenarios)], "seed": "base", "metrics": metrics,
                       "scenarios": [{"index": i, "matrix_entry": {"case": i}, "replicas": 1, "status": "pass", "verdict": "pass",
                                      "passed": True, "score": 1.0, "finished_at": "2026-11-25T00:00:02Z",
                                      "runs": [{**run, "run_id": f"run_exported{i}", "seed": f"seed-{i}"}]}
                                     for i in range(scenarios)]},
    }


def test_the_daemon_killed_during_an_import(tmp_path):
    """Killed while it reads and stores a 2,000-scenario import: after a restart the import is all there
    or not there at all, every listed experiment reads, and the store passes its integrity check."""
    from client.config import read_env_file

    home = short_home()
    try:
        assert svc(home, "daemon", "start").returncode == 0
        key = read_env_file(home / "credentials")["SERVICE_API_KEY"]
        body = tmp_path / "bundle.json"
        body.write_text(json.dumps(import_bundle(2000)))
        post = subprocess.Popen(["curl", "-s", "-o", "/dev/null", "--unix-socket", str(home / "svcd.sock"), "-H",
                                 f"Authorization: Bearer {key}", "-H", "Content-Type: application/json",
                                 "--data-binary", f"@{body}", "http://svcd/v1/experiments/import"])
        pid = int((home / "svcd.pid").read_text())
        wait_for_sync(lambda: (home / "svc.db-wal").exists() or None, timeout=10, what="the store open")
        time.sleep(0.5)  # the body is being read and checked
        os.kill(pid, signal.SIGKILL)
        wait_for_sync(lambda: not pid_alive(pid), what="the killed daemon to exit")
        post.wait(timeout=30)
        assert svc(home, "daemon", "start").returncode == 0
        listed = get_json(home, "eval", "list")
        items = listed.get("items", listed) if isinstance(listed, dict) else listed
        sizes = [len(get_json(home, "eval", "get", e["id"])["scenarios"]) for e in items]
    finally:
        svc(home, "daemon", "stop")
    try:
        print("killed import: experiments after the restart", sizes)
        assert (sizes in ([], [2000]), integrity(home)) == (True, "ok"), sizes
    finally:
        shutil.rmtree(home, ignore_errors=True)
