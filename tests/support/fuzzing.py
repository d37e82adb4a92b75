"""A real `svcd` subprocess for the schemathesis stages: its own temporary SERVICE_HOME, TCP port
and valid key, rate limiting out of the way."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import requests

from client.config import read_env_file
from tests.support.procs import ROOT
from tests.support.waiting import wait_for_sync


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def fuzzed_svcd() -> Iterator[tuple[str, str, Path]]:
    """(base URL, API key, home) of a fresh daemon, stopped and removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="svc-fuzz-", dir="/tmp"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT=str(port),
               SERVICE_RATE_LIMIT="100000", SERVICE_WEBHOOK_TIMEOUT_S="1",
               SERVICE_OUTBOUND_ALLOW_PRIVATE="1")  # as the suite's other daemons: a URL like http://0 stays schema-valid
    log = open(home / "stderr.txt", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, cwd=ROOT, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            assert proc.poll() is None, (home / "stderr.txt").read_text()
            try:
                return requests.get(base + "/health", timeout=1).status_code == 200
            except requests.RequestException:
                return False
        wait_for_sync(healthy, timeout=60, what="svcd to start", interval=0.1)
        yield base, read_env_file(home / "credentials")["SERVICE_API_KEY"], home
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(home, ignore_errors=True)
