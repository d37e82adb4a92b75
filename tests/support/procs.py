"""Real processes: an `svcd` subprocess driven over its socket, and the `svc` CLI as a subprocess."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from client.config import read_env_file

ROOT = Path(__file__).resolve().parents[2]


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0", SERVICE_POOL_SIZE="0",
               SERVICE_OUTBOUND_ALLOW_PRIVATE="1")  # the suite's receivers listen on 127.0.0.1
    env.update(extra)
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


class SvcdProcess:
    """A real `svcd` subprocess with its own home, reached over its Unix socket (keep the home short)."""

    def __init__(self, home: Path, settings: dict[str, str] | None = None):
        self.home = home
        self.socket = home / "svcd.sock"
        self.settings = settings or {}  # extra SERVICE_* variables
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
        env.update(SERVICE_HOME=str(self.home), SERVICE_SOCKET=str(self.socket), SERVICE_PORT="0", SERVICE_POOL_SIZE="0",
                   SERVICE_OUTBOUND_ALLOW_PRIVATE="1")  # the suite's receivers listen on 127.0.0.1
        env.update(self.settings)
        return env

    async def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=self.env(), cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            try:
                status, _ = await self.request("GET", "/health", auth=False)
                if status == 200:
                    return
            except (aiohttp.ClientError, FileNotFoundError, ConnectionRefusedError, OSError):
                pass
            assert time.monotonic() < deadline, "svcd did not answer within 60s"
            await asyncio.sleep(0.05)

    async def request(self, method: str, path: str, body=None, auth: bool = True):
        headers = {}
        if auth:
            headers["Authorization"] = "Bearer " + read_env_file(self.home / "credentials")["SERVICE_API_KEY"]
        connector = aiohttp.UnixConnector(path=str(self.socket))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.request(method, "http://svcd" + path, json=body, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=120)) as response:
                raw = await response.read()
                return response.status, (json.loads(raw) if raw else None)

    def kill(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)


async def svc_cli(api, *args: str, cwd: Path | None = None, home: Path | None = None, timeout: float = 180,
                  **env: str) -> tuple[int, str, str]:
    """The real `svc` CLI (a subprocess) against an in-process daemon (`tests.support.api.Api`) over
    TCP; returns (exit code, stdout, stderr). SERVICE_HOME is `home`, else the daemon's home, else `cwd`."""
    cwd = cwd or ROOT
    base = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    base.update(SERVICE_BASE_URL=api.base_url(), SERVICE_API_KEY=api.key, SERVICE_NO_AUTOSTART="1",
                SERVICE_HOME=str(home or api.home or cwd), **env)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "client.cli", *args, cwd=str(cwd), env=base,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()
