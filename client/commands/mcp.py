"""`svc mcp serve`: the stdio tool server for editor agents."""
from __future__ import annotations

import argparse

from client.api import Client


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("mcp", help="Model Context Protocol server for editor agents")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser("serve", help="serve the svc tools over stdio (JSON-RPC on stdout)")
    serve.set_defaults(func=serve_cmd)


async def serve_cmd(args, client: Client) -> int:
    from client.mcp_server import serve_stdio

    await serve_stdio(client)
    return 0
