"""`svc update [--force]`: upgrade the installed svc in place with pip from the configured index
(`SERVICE_UPDATE_INDEX`, else `svc configure --update-index URL`)."""
from __future__ import annotations

import argparse
import asyncio
import sys

from client.api import Client


def register(sub: argparse._SubParsersAction) -> None:
    update = sub.add_parser("update", help="upgrade svc in place from the configured package index (SERVICE_UPDATE_INDEX)")
    update.add_argument("--force", action="store_true", help="reinstall even when no newer version is found")
    update.set_defaults(func=update_cmd, needs_daemon=False)


async def update_cmd(args: argparse.Namespace, client: Client) -> int:
    from client import updates
    from client.console import CliError

    if updates.is_dev_install():
        raise CliError("this svc runs from a checkout or an editable install; update it with git, not `svc update`")
    try:
        index = updates.index_url()
    except ValueError as exc:  # an unreadable config.toml
        raise CliError(str(exc))
    if index is None:
        raise CliError("no package index configured: set SERVICE_UPDATE_INDEX or run "
                       "`svc configure --update-index URL` (the index svc is published on; PyPI's svc is another project)")
    where = updates.shown(index)
    current = updates.installed_version()
    try:
        latest = await asyncio.to_thread(updates.newest_version, index, 30.0)
    except Exception as exc:  # urllib raises several kinds; all mean the same to the user
        reason = getattr(exc, "reason", None) or getattr(exc, "code", None) or type(exc).__name__
        raise CliError(f"cannot read the package index {where}: {reason}")
    if latest is None:
        raise CliError(f"the package index {where} lists no svc release")
    if not args.force and not updates.is_newer(latest, current):
        print(f"svc: {current} is up to date (newest on {where}: {latest})", file=sys.stderr)
        return 0
    print(f"svc: installing {latest} (installed: {current}) from {where}", file=sys.stderr, flush=True)
    reinstall = args.force and not updates.is_newer(latest, current)
    result = await asyncio.to_thread(updates.pip_upgrade, latest, index, reinstall)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise CliError(f"pip could not install svc {latest}: {last.replace(index, where)}")
    updates.write_state({**updates.read_state(), "latest": latest})
    print(f"svc: updated to {latest}", file=sys.stderr)
    return 0
