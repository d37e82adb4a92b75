"""Opening the terminal UI: `svc tui`, `svc` alone in a terminal and `python -m tui` start here. The
local daemon is started when needed (a failure is shown inside the UI, which keeps retrying)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from client import daemonctl
from client.config import ClientConfig, resolve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--theme", help="dark, light, high-contrast, or any Textual theme (env SERVICE_THEME)")
    parser.add_argument("--watch", metavar="SPEC", help="start in watch mode on this spec file")
    parser.add_argument("--screen", choices=("experiments", "sandboxes", "launch"), default="experiments",
                        help="the screen to open on (default experiments)")


def prepare(config: ClientConfig, args: argparse.Namespace) -> tuple[ClientConfig, str | None]:
    """Autostart the local daemon; a failure is shown inside the UI, which keeps retrying."""
    notice = None
    try:
        daemonctl.ensure_running(config)
    except RuntimeError as exc:
        notice = f"could not start svcd: {exc}"
    if config.api_key is None:  # a daemon started just now has written the credentials file
        config = resolve(api_key=getattr(args, "api_key", None), base_url=getattr(args, "base_url", None), timeout=getattr(args, "timeout", None))
    return config, notice


def build_app(config: ClientConfig, args: argparse.Namespace, notice: str | None, backend: Any = None) -> Any:
    from tui.app import SvcApp

    watch = Path(args.watch) if getattr(args, "watch", None) else None
    app = SvcApp(config, theme=getattr(args, "theme", None), backend=backend, watch_spec=watch,
                 start_mode=getattr(args, "screen", None) or "experiments")
    app.startup_notice = notice
    return app


def main_default(args: argparse.Namespace) -> int:
    """`svc` alone in a terminal: open the UI with the global flags given."""
    config = resolve(api_key=getattr(args, "api_key", None), base_url=getattr(args, "base_url", None), timeout=getattr(args, "timeout", None))
    config, notice = prepare(config, args)
    app = build_app(config, args, notice)
    app.run()
    return int(app.return_code or 0)


def main(argv: list[str] | None = None) -> int:
    """`python -m tui`."""
    parser = argparse.ArgumentParser(prog="svc tui", description="The svc terminal UI.")
    parser.add_argument("--api-key")
    parser.add_argument("--base-url")
    parser.add_argument("--timeout", type=float)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return main_default(args)
    except ValueError as exc:
        print(f"svc: {exc}", file=sys.stderr)
        return 1
