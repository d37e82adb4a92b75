"""Shapes the resource commands share: a command with ACTION subcommands, actions that take only
an id, an answer printed as JSON, and JSON lines read from a file."""
from __future__ import annotations

import argparse
import json
from typing import Any, Awaitable, Callable

from client.api import Client

Action = Callable[[argparse.Namespace, Client], Awaitable[int]]


def action_group(sub: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """`svc <name> ACTION ...`: the subparsers its actions are added to."""
    command = sub.add_parser(name, help=help)
    return command.add_subparsers(dest="action", metavar="ACTION", required=True)


def add_list(actions: argparse._SubParsersAction, func: Action, help: str) -> argparse.ArgumentParser:
    """A `list` action with --limit (default 100)."""
    ls = actions.add_parser("list", help=help)
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=func)
    return ls


def add_id_actions(actions: argparse._SubParsersAction, id_name: str, *specs: tuple[str, Action, str]) -> None:
    """Actions (name, func, help) whose only argument is the resource's id, stored as `id_name`."""
    for name, func, text in specs:
        action = actions.add_parser(name, help=text)
        action.add_argument(id_name)
        action.set_defaults(func=func)


async def print_answer(answer: Awaitable[Any]) -> int:
    """Print the daemon's answer as JSON on stdout; exit 0."""
    from client.console import emit

    emit(await answer)
    return 0


async def delete_and_say(client: Client, route: Any, message: str, **path: Any) -> int:
    """Call the DELETE `route` (its path filled from `path`), then `message` on stderr; exit 0."""
    from client.console import say

    await client.call(route, **path)
    say(message)
    return 0


def json_lines(path: str, text: str) -> tuple[list[Any], list[int]]:
    """The values of the non-blank lines of `text` and the line number of each; a line that is not
    JSON is an error naming `path`:line."""
    from client.console import CliError

    values, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except ValueError as exc:
            raise CliError(f"{path}:{number}: not JSON: {exc}")
        lines.append(number)
    return values, lines
