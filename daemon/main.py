"""`svcd`: serve the API on the Unix socket (0600) and on 127.0.0.1:$SERVICE_PORT until signalled."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import psutil
from aiohttp import web

from daemon import __version__, logs
from daemon.app import create_app, secure_home
from daemon.config import Settings
from daemon.parse_errors import JsonErrorRunner

log = logging.getLogger("svcd")


def running_pid(pid_path: Path) -> int | None:
    """The pid in the pidfile when that process is alive and is an svcd, else None."""
    try:
        pid = int(pid_path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return pid if ("svcd" in cmdline or "daemon.main" in cmdline) else None


def _socket_in_use(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


async def start_unix_sites(runner: web.AppRunner, settings: Settings) -> None:
    """The client socket (0600) and the sandbox socket (0666: agents may run as any user, and it
    accepts nothing but sandbox tokens)."""
    assert settings.socket_path is not None
    settings.socket_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path, mode in ((settings.socket_path, 0o600), (settings.sandbox_socket_path, 0o666)):
        if path.exists():
            if _socket_in_use(path):
                raise SystemExit(f"svcd: another daemon answers on {path}")
            path.unlink()  # stale socket of a daemon that died
        old_umask = os.umask(0o177)
        try:
            await web.UnixSite(runner, str(path)).start()
        finally:
            os.umask(old_umask)
        os.chmod(path, mode)


async def serve(settings: Settings) -> None:
    app = create_app(settings)
    # Open SSE streams must not hold a stopping daemon for long.
    runner = JsonErrorRunner(app, handle_signals=False, access_log=None, shutdown_timeout=3.0)
    await runner.setup()
    sock_path = settings.socket_path
    assert sock_path is not None
    await start_unix_sites(runner, settings)
    if settings.port:
        try:
            await web.TCPSite(runner, "127.0.0.1", settings.port, reuse_address=True).start()
        except OSError as exc:
            await runner.cleanup()
            raise SystemExit(f"svcd: cannot listen on 127.0.0.1:{settings.port}: {exc.strerror}")
    log.info("svcd %s listening", __version__, extra={"socket": str(sock_path), "port": settings.port, "pid": os.getpid()})
    print(f"svcd {__version__} listening on unix://{sock_path} and http://127.0.0.1:{settings.port} (pid {os.getpid()})", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("svcd shutting down")
    await runner.cleanup()
    for path in (sock_path, settings.sandbox_socket_path):
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="svcd", description="The svc daemon: sandboxes, runs, scoring and storage behind the /v1 API.")
    parser.add_argument("--version", "-v", action="version", version=f"svcd {__version__}")
    parser.add_argument("--port", type=int, help="TCP port on 127.0.0.1 (env SERVICE_PORT, default 7878; 0 disables TCP)")
    parser.add_argument("--socket", help="Unix socket path (env SERVICE_SOCKET)")
    parser.add_argument("--home", help="state directory (env SERVICE_HOME)")
    args = parser.parse_args(argv)
    if args.home:
        os.environ["SERVICE_HOME"] = args.home
    settings = Settings.from_env()
    if args.port is not None:
        settings.port = args.port
    if args.socket:
        settings.socket_path = Path(args.socket)
    secure_home(settings)  # 0700 before anything (the log, the pidfile) is written in it
    logs.configure(settings.log_path, to_stderr=False)
    secure_home(settings)  # the log file just made: 0600
    pid = running_pid(settings.pid_path)
    if pid is not None and pid != os.getpid():
        print(f"svcd: already running (pid {pid}); stop it with 'svc daemon stop'", file=sys.stderr)
        return 1
    settings.pid_path.write_text(str(os.getpid()))
    try:
        asyncio.run(serve(settings))
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        try:
            if settings.pid_path.read_text().strip() == str(os.getpid()):
                settings.pid_path.unlink()
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
