"""A real `svcd` subprocess for the schemathesis stages: its own temporary SERVICE_HOME, TCP port
and valid key, rate limiting out of the way; and the one check both stages put in place of
schemathesis' positive_data_acceptance."""
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
from schemathesis.checks import positive_data_acceptance

from client.config import read_env_file
from daemon.openapi import REFUSES
from tests.support.procs import ROOT
from tests.support.waiting import wait_for_sync


# What the one JSON decoder refuses in any body, as the document's info.description says
# (daemon.http.decode_json).
DECODER_REFUSALS = ("number out of range", "number too large")


def documented_refusal(case, response) -> bool:
    """A 400 the document announces: the operation's `x-refuses-valid`, or the decoder's limits."""
    if response.status_code != 400:
        return False
    if REFUSES in case.operation.definition.raw:
        return True
    try:
        errors = response.json().get("details", {}).get("errors", [])
    except ValueError:
        return False
    return any(error.get("msg") in DECODER_REFUSALS for error in errors)


def positive_data_accepted(ctx, response, case):
    """schemathesis' positive_data_acceptance, except for a refusal the document announces."""
    if documented_refusal(case, response):
        return None
    return positive_data_acceptance(ctx, response, case)


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
