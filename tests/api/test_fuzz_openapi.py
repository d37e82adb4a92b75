"""Fuzzing stage: schemathesis drives every /v1 operation of GET /v1/openapi.json against a real
svcd (a subprocess in a temporary SERVICE_HOME, with its own valid key) and fails on any 5xx.

Operations that start containers (sandbox, run, replay, replica-suite and experiment-run creation)
are left out so the stage stays fast and needs no engine; everything else gets schema-valid and
schema-invalid (negative) examples, bounded per operation (SERVICE_FUZZ_EXAMPLES, default 80) so
the whole stage takes about a minute on 2 cores.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
import schemathesis  # the test extras install it: a missing fuzzer is an error, not a skip
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error

from client.config import read_env_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("SERVICE_FUZZ_EXAMPLES") or 80)
# (method, path) of the operations that start containers: left out.
STARTS_CONTAINERS = {
    ("POST", "/v1/sandboxes"),
    ("POST", "/v1/runs"),
    ("POST", "/v1/runs/{run_id}/replay"),
    ("POST", "/v1/replicas"),
    ("POST", "/v1/experiments/{experiment_id}/run"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fuzz_daemon():
    home = Path(tempfile.mkdtemp(prefix="svc-fuzz-", dir="/tmp"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT=str(port),
               SERVICE_RATE_LIMIT="100000", SERVICE_WEBHOOK_TIMEOUT_S="1")
    log = open(home / "stderr.txt", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, cwd=ROOT, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (home / "stderr.txt").read_text()
            try:
                if requests.get(base + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "svcd did not start"
            time.sleep(0.1)
        key = read_env_file(home / "credentials")["SERVICE_API_KEY"]
        yield base, key, home
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def _fuzzed(ctx) -> bool:
    operation = ctx.operation
    return operation.path.startswith("/v1/") and (operation.method.upper(), operation.path) not in STARTS_CONTAINERS


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_daemon):
    base, key, _ = fuzz_daemon
    schema = schemathesis.openapi.from_url(base + "/v1/openapi.json", timeout=10)
    return schema.include(_fuzzed)


schema = schemathesis.pytest.from_fixture("fuzz_schema")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx(case, fuzz_daemon):
    base, key, home = fuzz_daemon
    headers = {"Authorization": f"Bearer {key}"}
    try:
        case.call_and_validate(base_url=base, headers=headers, checks=[not_a_server_error], timeout=15)
    except Exception:
        log = home / "logs" / "svcd.log"
        if log.exists():
            errors = [line for line in log.read_text().splitlines() if '"level": "error"' in line]
            print("\n".join(errors[-3:]))
        raise
