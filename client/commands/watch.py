"""`svc watch SPEC.yaml` (and `svc eval watch SPEC.yaml`): re-run a spec whenever the spec or a file
it references (fixtures, SQL files, a snapshot agent's `source:` directory, re-uploaded first, secret files) changes. Debounced; a run
made stale by a newer change is cancelled. Ctrl-C stops (and cancels the run in flight)."""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    add_watch_parser(sub)


def add_watch_parser(subparsers: argparse._SubParsersAction, name: str = "watch") -> argparse.ArgumentParser:
    """Adds the `watch` command to any subparsers (top level, or `svc eval`)."""
    parser = subparsers.add_parser(name, help="re-run a spec on every change to it or the files it references")
    parser.add_argument("spec", metavar="SPEC.yaml")
    parser.add_argument("--name", help="experiment name (default: '<spec> v<version> · watch <HH:MM>')")
    parser.add_argument("--replicas", type=int, help="override parallelism.replicas")
    parser.add_argument("--concurrency", type=int, help="scenarios at once")
    parser.add_argument("--debounce", type=int, default=300, metavar="MS", help="quiet time before a change counts (default 300 ms)")
    parser.add_argument("--no-initial-run", action="store_true", help="wait for the first change before running")
    parser.add_argument("--json", action="store_true", help="print events as NDJSON on stdout")
    parser.set_defaults(func=watch_command)
    return parser


async def watch_command(args: argparse.Namespace, client) -> int:
    from tui.watch import ApiLauncher, WatchEngine, WatchEvent

    spec = Path(args.spec)
    if not spec.is_file():
        print(f"svc: {spec}: no such file", file=sys.stderr)
        return 1

    from client.progress import ProgressLine

    lines: dict[str, ProgressLine] = {}

    def show(event: WatchEvent) -> None:
        if args.json:
            print(json.dumps({"ts": event.ts, "kind": event.kind, "message": event.message, "experiment_id": event.experiment_id}), flush=True)
            return
        if event.kind == "progress":
            if event.detail is not None:  # a terminal: one line rewritten in place; else a line per change
                line = lines.setdefault(event.experiment_id or "", ProgressLine(f"svc: {event.experiment_id}"))
                statuses = [row.status for row in event.detail.scenarios]
                line.update(event.detail.row.done or 0, event.detail.row.total or 0,
                            statuses.count("pass"), statuses.count("fail"), statuses.count("error"))
            return
        for line in lines.values():
            line.finish()
        stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
        print(f"{stamp} {event.kind:<9} {event.message}", file=sys.stderr, flush=True)
        if event.kind == "invalid":
            for issue in event.detail or []:
                print(f"  {spec}:{issue.line or '?'} {issue.loc}: {issue.msg}", file=sys.stderr, flush=True)

    launcher = ApiLauncher(client, name=args.name, replicas=args.replicas, concurrency=args.concurrency)
    engine = WatchEngine(spec, launcher, debounce_ms=args.debounce, on_event=show, run_on_start=not args.no_initial_run)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, engine.stop)
        except (NotImplementedError, RuntimeError):
            pass  # no signal handlers off the main thread (tests); ctrl-c then ends the process instead
    print(f"svc: watching {spec} (ctrl-c stops)", file=sys.stderr, flush=True)
    await engine.run()
    print(f"svc: stopped; {len(engine.runs)} run(s), {len(engine.cancelled)} cancelled", file=sys.stderr, flush=True)
    return 0
