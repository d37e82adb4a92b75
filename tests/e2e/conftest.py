"""End-to-end: a real svcd subprocess with its own home, reached over its Unix socket."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0", **extra)
    return env


def run_svc(home: Path, *args: str, input: str | None = None, cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args],
        env=cli_env(home, **extra),
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        input=input,
        timeout=120,
    )


@pytest.fixture
def home(tmp_path):
    # Unix socket paths are limited to ~107 bytes; keep the home short.
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="svc-e2e-", dir="/tmp"))
    yield short
    run_svc(short, "daemon", "stop")
    import shutil

    shutil.rmtree(short, ignore_errors=True)
