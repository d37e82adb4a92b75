"""Start, stop and inspect the local svcd (pidfile + psutil liveness)."""
from __future__ import annotations

import os
import signal
import site
import subprocess
import sys
import time
from pathlib import Path

import psutil

from client.config import ClientConfig, default_socket


def pid_path(home: Path) -> Path:
    return home / "svcd.pid"


def running_pid(home: Path) -> int | None:
    try:
        pid = int(pid_path(home).read_text().strip())
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = " ".join(proc.cmdline())
    except (FileNotFoundError, ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return pid if ("svcd" in cmdline or "daemon.main" in cmdline) else None


def socket_answers(path: Path) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1)
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def start(config: ClientConfig, wait_s: float = 20.0) -> int:
    """Start svcd in the background; returns its pid. Raises RuntimeError when it does not come up."""
    pid = running_pid(config.home)
    if pid is not None:
        return pid
    config.home.mkdir(parents=True, exist_ok=True)
    log_dir = config.home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SERVICE_HOME=str(config.home))
    if config.socket_path is not None:
        env["SERVICE_SOCKET"] = str(config.socket_path)
    # The daemon runs the code this CLI runs: never a `daemon` package that happens to sit in the
    # user's current directory (-P keeps the cwd off sys.path), always the tree `client` came from.
    code_root = str(Path(__file__).resolve().parent.parent)
    if code_root not in site.getsitepackages():  # a checkout: installed code is found anyway
        env["PYTHONPATH"] = os.pathsep.join(p for p in (code_root, env.get("PYTHONPATH")) if p)
    with open(log_dir / "svcd.stderr", "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "daemon.main"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
        )
    # With an http:// base URL the daemon still opens its home's socket: that is where it answers first.
    socket_path = config.socket_path or default_socket(config.home)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (log_dir / "svcd.stderr").read_text(errors="replace")[-800:]
            raise RuntimeError(f"svcd exited with code {proc.returncode}:\n{tail}")
        if socket_answers(socket_path):
            return proc.pid
        time.sleep(0.05)
    raise RuntimeError(f"svcd did not answer on {socket_path} within {wait_s:.0f}s; see {log_dir}")


def stop(config: ClientConfig, wait_s: float = 30.0) -> int | None:
    pid = running_pid(config.home)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    try:
        psutil.Process(pid).wait(timeout=wait_s)
    except psutil.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
    except psutil.NoSuchProcess:
        pass
    return pid


def ensure_running(config: ClientConfig) -> None:
    """Autostart: only for the local socket, only when nothing answers, unless SERVICE_NO_AUTOSTART."""
    if not config.is_unix or os.environ.get("SERVICE_NO_AUTOSTART"):
        return
    if config.socket_path is not None and socket_answers(config.socket_path):
        return
    if running_pid(config.home) is not None:  # still starting (the retries wait for it), or on another socket
        return
    print(f"svc: starting the daemon in the background (logs: {config.home / 'logs' / 'svcd.log'})", file=sys.stderr)
    start(config)
