"""The real `svc` CLI as a subprocess against an in-process daemon over TCP, with the user's
config directory (XDG_CONFIG_HOME) kept inside the test's own directory; or its `main` on a
thread of this process (`svc_in_thread`), for tests that read its output only."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from client.cli import main
from tests.support.procs import ROOT


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cli_environ(base_url: str, key: str | None, home: Path, **extra: str) -> dict[str, str]:
    """No SERVICE_* from the outer environment; config under `home`/config; no autostart, no update check."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_BASE_URL=base_url, SERVICE_NO_AUTOSTART="1", SERVICE_NO_AUTO_UPDATE="1",
               SERVICE_HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), HOME=str(home),
               PYTHONPATH=str(ROOT))  # the checkout, not the copy installed in the venv, whatever the cwd
    if key is not None:
        env["SERVICE_API_KEY"] = key
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def svc_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "client.cli", *args]


def run_cli(env: dict[str, str], *args: str, cwd: Path | None = None, input: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Blocking: call it from a thread (asyncio.to_thread) when the daemon runs in this event loop."""
    return subprocess.run(svc_command(*args), env=env, cwd=cwd or ROOT, capture_output=True, text=True,
                          input=input, timeout=timeout)


async def svc_in_thread(api, *argv: str) -> tuple[int, str, str]:
    """`svc argv` through client.cli.main on a thread, against the in-process daemon `api` over TCP:
    (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    base = str(api.client.make_url("")).rstrip("/")

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return main(["--base-url", base, "--api-key", api.key, *argv])

    code = await asyncio.to_thread(call)
    return code, out.getvalue(), err.getvalue()


async def svc_json_in_thread(api, *argv: str) -> tuple[int, object, str]:
    """As svc_in_thread, stdout parsed as JSON (None when empty)."""
    code, out, err = await svc_in_thread(api, *argv)
    return code, json.loads(out) if out.strip() else None, err
