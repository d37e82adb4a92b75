"""What hostile work costs a real svcd (a subprocess in a temporary SERVICE_HOME). A script, not a
test: it prints numbers and asserts nothing.

    .venv/bin/python -m tests.bench.bench_hostile [--size-mb 500] [--polls 200]

1. Memory: the daemon's RSS at rest, then its peak while it serves GET /v1/sandboxes/{id}/files/big.bin
   for a file of --size-mb (streamed: the peak should stay near the baseline, not grow by the file's
   size), sampled every 5 ms from another thread (and the kernel's VmHWM high-water mark).
2. Latency: GET /health p50/p95/max at rest, and while a run's file_content check matches the
   catastrophic regex ^(a|aa)+$ against 55 a's and a '!' (it runs off the event loop until the check's
   time limit, SERVICE_CHECK_TIME_LIMIT_S, here 5 s).
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests
import yaml

from tests.support.images import PYTHON

ROOT = Path(__file__).resolve().parents[2]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round((len(ordered) - 1) * p)))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daemon(home: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT=str(port),
               SERVICE_RATE_LIMIT="100000", SERVICE_CHECK_TIME_LIMIT_S="5")
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except requests.RequestException:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("svcd did not start")
        time.sleep(0.1)


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class RssSampler:
    def __init__(self, pid: int):
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def health_latencies(base: str, stop: threading.Event, out: list[float], failures: list[str]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            requests.get(base + "/health", timeout=5).raise_for_status()
            out.append((time.perf_counter() - started) * 1000)
        except requests.RequestException as exc:
            failures.append(str(exc))
        time.sleep(0.02)


def upload(base: str, headers: dict, doc: dict) -> None:
    response = requests.post(base + "/v1/specs", json={"name": doc["id"], "yaml": yaml.safe_dump(doc)}, headers=headers, timeout=30)
    response.raise_for_status()


def memory(base: str, headers: dict, home: Path, pid: int, size_mb: int) -> None:
    doc = {"version": 1, "id": "bench-file", "base": PYTHON, "task": {"prompt": "bench"},
           "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}}}
    upload(base, headers, doc)
    response = requests.post(base + "/v1/sandboxes", json={"spec_id": "bench-file"}, headers=headers, timeout=120)
    response.raise_for_status()
    sandbox_id = response.json()["id"]
    try:
        target = home / "workspaces" / sandbox_id / "big.bin"
        block = os.urandom(1 << 20)
        with open(target, "wb") as fh:
            for _ in range(size_mb):
                fh.write(block)
        time.sleep(0.5)
        baseline = psutil.Process(pid).memory_info().rss
        hwm_before = vm_hwm_mb(pid)
        started = time.perf_counter()
        received = 0
        with RssSampler(pid) as sampler:
            with requests.get(f"{base}/v1/sandboxes/{sandbox_id}/files/big.bin", headers=headers, stream=True, timeout=300) as r:
                r.raise_for_status()
                for chunk in r.iter_content(1 << 20):
                    received += len(chunk)
        seconds = time.perf_counter() - started
        print(f"memory: served a {size_mb} MiB workspace file ({received / 2**20:.0f} MiB received) in {seconds:.2f}s "
              f"({received / 2**20 / seconds:.0f} MiB/s)")
        print(f"  daemon RSS at rest {baseline / 2**20:.1f} MiB, peak while serving {sampler.peak / 2**20:.1f} MiB "
              f"(+{(sampler.peak - baseline) / 2**20:.1f} MiB); VmHWM {hwm_before:.1f} -> {vm_hwm_mb(pid):.1f} MiB")
    finally:
        requests.delete(f"{base}/v1/sandboxes/{sandbox_id}", headers=headers, timeout=120)


def latency(base: str, headers: dict, polls: int) -> None:
    rest: list[float] = []
    for _ in range(polls):
        started = time.perf_counter()
        requests.get(base + "/health", timeout=5).raise_for_status()
        rest.append((time.perf_counter() - started) * 1000)
    line = "a" * 55 + "!"
    doc = {"version": 1, "id": "bench-regex", "base": PYTHON, "task": {"prompt": "bench"},
           "agent": {"type": "cli", "binary": "sh", "args": ["-c", f"printf '%s\\n' '{line}' > evil.txt"], "timeout": "30s"},
           "invariants": {"bomb": {"check": {"type": "file_content", "path": "evil.txt", "regex": "^(a|aa)+$"}}},
           "resources": {"timeout": "3m"}}
    upload(base, headers, doc)
    run = requests.post(base + "/v1/runs", json={"spec_id": "bench-regex"}, headers=headers, timeout=30).json()
    during: list[float] = []
    failures: list[str] = []
    stop = threading.Event()
    # measure only while the check runs: from the run's start until it is finished
    while requests.get(f"{base}/v1/runs/{run['id']}", headers=headers, timeout=10).json()["status"] == "queued":
        time.sleep(0.05)
    poller = threading.Thread(target=health_latencies, args=(base, stop, during, failures))
    poller.start()
    while True:
        body = requests.get(f"{base}/v1/runs/{run['id']}", headers=headers, timeout=10).json()
        if body["status"] in ("passed", "failed", "errored"):
            break
        time.sleep(0.1)
    stop.set()
    poller.join()
    bomb = next(r for r in body["invariant_results"] if r["invariant_id"] == "bomb")
    print(f"latency: GET /health at rest p50 {pct(rest, .5):.2f} ms, p95 {pct(rest, .95):.2f} ms, max {max(rest):.2f} ms "
          f"({len(rest)} requests)")
    print(f"  during the run with the catastrophic regex: p50 {pct(during, .5):.2f} ms, p95 {pct(during, .95):.2f} ms, "
          f"max {max(during) if during else float('nan'):.2f} ms ({len(during)} answered, {len(failures)} failed); "
          f"check {bomb['status']} evidence {dict((k, bomb['evidence'].get(k)) for k in ('timeout', 'time_limit_s'))}, "
          f"run {body['status']} in {body.get('duration_ms') or '?'} ms")
    if during:
        print(f"  mean during {statistics.mean(during):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--polls", type=int, default=200)
    args = parser.parse_args()
    from daemon.sandbox.images import ensure_stock_images

    ensure_stock_images(log=lambda m: print(m))
    home = Path(tempfile.mkdtemp(prefix="svc-bh-", dir="/tmp"))
    port = free_port()
    proc = start_daemon(home, port)
    base = f"http://127.0.0.1:{port}"
    from client.config import read_env_file

    headers = {"Authorization": "Bearer " + read_env_file(home / "credentials")["SERVICE_API_KEY"]}
    try:
        memory(base, headers, home, proc.pid, args.size_mb)
        latency(base, headers, args.polls)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
