"""`svc keys create|list|rotate|delete`."""
from __future__ import annotations

import argparse
import sys

from client.api import Client
from client.routes import R


def register(sub: argparse._SubParsersAction) -> None:
    keys = sub.add_parser("keys", help="API keys of your tenant")
    actions = keys.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a key; its secret is printed once")
    create.add_argument("name")
    create.set_defaults(func=create_key)
    ls = actions.add_parser("list", help="list keys (never their secrets)")
    ls.set_defaults(func=list_keys)
    rotate = actions.add_parser("rotate", help="rotate a key; the old secret stops working at once")
    rotate.add_argument("key_id")
    rotate.set_defaults(func=rotate_key)
    delete = actions.add_parser("delete", help="revoke a key")
    delete.add_argument("key_id")
    delete.set_defaults(func=delete_key)


async def create_key(args, client: Client) -> int:
    from client.console import emit

    key = await client.call(R.CREATE_KEY, body={"name": args.name})
    print("store this secret now; it is not shown again", file=sys.stderr)
    emit(key)
    return 0


async def list_keys(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.LIST_KEYS))
    return 0


async def rotate_key(args, client: Client) -> int:
    from client.console import emit

    key = await client.call(R.ROTATE_KEY, key_id=args.key_id)
    print("the old secret no longer works; store the new one now", file=sys.stderr)
    emit(key)
    return 0


async def delete_key(args, client: Client) -> int:
    await client.call(R.DELETE_KEY, key_id=args.key_id)
    print(f"revoked key {args.key_id}", file=sys.stderr)
    return 0
