"""`svc`: the command-line client. Data goes to stdout as JSON, messages to stderr.
Exit codes: 0 success; 1 command-line error, network failure, failed experiment or gate."""
from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys

from daemon import __version__

from client import daemonctl
from client.api import MAX_ATTEMPTS, ApiError, Client, DaemonUnreachable
from client.config import resolve
from client.console import CliError, say

# Each module defines `register(subparsers)`; its parsers set `func` (async fn(args, client) -> int)
# and `needs_daemon` (default True).
COMMAND_MODULES = (
    "client.commands.daemon",
    "client.commands.specs",
    "client.commands.keys",
    "client.commands.sandboxes",
    "client.commands.images",
    "client.commands.logs",
    "client.commands.agents",
    "client.commands.runs",
    "client.commands.traces",
    "client.commands.mcp",
    "client.commands.tui",
    "client.commands.watch",
    "client.commands.eval",
    "client.commands.replicas",
    "client.commands.alerts",
    "client.commands.behaviors",
    "client.commands.judges",
    "client.commands.datasets",
    "client.commands.tasks",
    "client.commands.login",
    "client.commands.setup",
    "client.commands.doctor",
    "client.commands.completion",
    "client.commands.update",
    "client.commands.scores",
    "client.commands.chat",
    "client.commands.investigate",
)


class Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit 1 (SPEC: every failure is 1); subcommands inherit it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(1, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="svc", description="svc: run AI agents in throw-away sandboxes and score them.")
    parser.add_argument("--version", "-v", action="version", version=f"svc {__version__}")
    parser.add_argument("--api-key", help="API key (env SERVICE_API_KEY; default: the daemon's credentials file)")
    parser.add_argument("--base-url", help="daemon address: http://host:port or unix:///path.sock (env SERVICE_BASE_URL)")
    parser.add_argument("--timeout", metavar="DURATION", help="HTTP timeout: seconds or a duration like 30s, 2m (default 30s)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


async def _run(args: argparse.Namespace) -> int:
    try:
        config = resolve(api_key=args.api_key, base_url=args.base_url, timeout=args.timeout,
                         use_config_file=args.command != "configure")  # configure can repair a broken file
    except ValueError as exc:
        raise CliError(str(exc))
    args.config = config
    if getattr(args, "needs_daemon", True):
        try:
            await asyncio.to_thread(daemonctl.ensure_running, config)
        except RuntimeError as exc:
            raise CliError(str(exc))
        if config.api_key is None:  # a daemon started just now has written the credentials file
            config = resolve(api_key=args.api_key, base_url=args.base_url, timeout=args.timeout)
            args.config = config
    async with Client(config) as client:
        if args.command != "tui":  # the TUI shows an outage and reconnects by itself
            client.max_attempts = MAX_ATTEMPTS
            client.on_retry = lambda message: say(f"svc: {message}")
        return await args.func(args, client)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`svc eval list | head -1`): stop quietly; point stdout at /dev/null so the
        # interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        if sys.stdin.isatty() and sys.stdout.isatty() and argv is None and len(sys.argv) == 1:
            try:
                tui_cli = importlib.import_module("client.commands.tui")
                return tui_cli.main_default(args)
            except ModuleNotFoundError:
                pass
        parser.print_help(sys.stderr)
        return 1
    from client.updates import auto_check

    notice = auto_check(args.command)
    if notice:
        say(f"svc: {notice}")
    try:
        return asyncio.run(_run(args))
    except CliError as exc:
        say(f"svc: {exc}")
        return 1
    except ApiError as exc:
        message = exc.body.get("message", "")
        say(f"svc: {exc.status} {exc.code}: {message}")
        issues = exc.details.get("errors") if isinstance(exc.details, dict) else None
        issues = [i for i in issues if isinstance(i, dict)] if isinstance(issues, list) else []
        if len(issues) == 1 and str(issues[0].get("msg", "")) in message:
            issues = []  # the message already says it: keep the error on one line
        for issue in issues:
            where = f"line {issue['line']} " if issue.get("line") else ""
            say(f"  {where}{issue.get('loc', '')}: {issue.get('msg', '')}")
        return 1
    except DaemonUnreachable as exc:
        say(f"svc: {exc}")
        return 1
    except KeyboardInterrupt:
        say("svc: interrupted")
        return 130
    except BrokenPipeError:
        raise
    except OSError as exc:  # a file the command reads or writes
        say(f"svc: {exc}")
        return 1
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("SERVICE_DEBUG"):
            raise
        say(f"svc: unexpected {type(exc).__name__}: {exc} (SERVICE_DEBUG=1 shows the traceback)")
        return 1


if __name__ == "__main__":
    # Run the imported module, not __main__, so this module and the commands share one copy of it.
    from client.cli import main as imported_main

    sys.exit(imported_main())
