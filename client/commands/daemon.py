"""`svc daemon start|stop|status|logs`."""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from client import daemonctl
from client.api import Client, DaemonUnreachable
from client.routes import R


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("daemon", help="start, stop and inspect the local svcd")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, func, text in (
        ("start", start, "start svcd in the background"),
        ("stop", stop, "stop svcd (SIGTERM, sandboxes are stopped)"),
        ("status", status, "is svcd running, where, which version"),
    ):
        p = actions.add_parser(name, help=text)
        p.set_defaults(func=func, needs_daemon=False)
    logs = actions.add_parser("logs", help="print the daemon's JSON log")
    logs.add_argument("-n", "--lines", type=int, default=50, help="how many lines from the end (default 50)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.set_defaults(func=show_logs, needs_daemon=False)


async def start(args, client: Client) -> int:
    config = args.config
    existing = daemonctl.running_pid(config.home)
    if existing:
        print(f"svcd already running (pid {existing})", file=sys.stderr)
        return 0
    try:
        pid = await asyncio.to_thread(daemonctl.start, config)
    except RuntimeError as exc:
        print(f"svc: {exc}", file=sys.stderr)
        return 1
    print(f"svcd started (pid {pid}) on {config.base_url}", file=sys.stderr)
    return 0


async def stop(args, client: Client) -> int:
    pid = await asyncio.to_thread(daemonctl.stop, args.config)
    print("svcd was not running" if pid is None else f"svcd stopped (pid {pid})", file=sys.stderr)
    return 0


async def status(args, client: Client) -> int:
    from client.console import emit

    pid = daemonctl.running_pid(args.config.home)
    info = {"running": pid is not None, "pid": pid, "base_url": args.config.base_url, "home": str(args.config.home)}
    if pid is not None:
        try:
            info["health"] = await client.call(R.HEALTH)
        except DaemonUnreachable as exc:
            info["health"] = {"status": "unreachable", "error": str(exc)}
    emit(info)
    return 0 if pid is not None else 1


async def show_logs(args, client: Client) -> int:
    path = args.config.home / "logs" / "svcd.log"
    if not path.exists():
        print(f"svc: no daemon log at {path}", file=sys.stderr)
        return 1
    with open(path, errors="replace") as handle:
        for line in handle.readlines()[-args.lines:]:
            sys.stdout.write(line)
        while args.follow:
            line = handle.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.3)
    return 0
