"""`svc tui [--theme NAME] [--watch SPEC]`, and `svc` with no arguments in a terminal: the Textual UI
(tui.main opens it). It attaches to the daemon through client/ only (starting it when needed)."""
from __future__ import annotations

import argparse

from tui.main import add_arguments, build_app, main_default, prepare

__all__ = ["main_default", "register", "run_tui"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tui", help="open the terminal UI (also: svc with no arguments)")
    add_arguments(parser)
    parser.set_defaults(func=run_tui, needs_daemon=False)


async def run_tui(args: argparse.Namespace, client) -> int:
    import asyncio

    from tui.backend import Backend

    config, notice = await asyncio.to_thread(prepare, args.config, args)
    if config is not args.config:
        from client.api import Client

        client = Client(config)
    app = build_app(config, args, notice, backend=Backend(client))
    await app.run_async()
    return app.return_code or 0
