"""`svc doctor`: env files, key, daemon reachable, key accepted, versions, the nodes sandboxes run on
(each ready, active and reachable), Docker engine, stock images,
the engine's log (a start-up panic in its network store), leftovers on the engine (`--fix` removes
them; client/setup/leftovers.py), `svc` on PATH. Each check prints ok or a hint on stderr; exit 1 when any fails. Never starts the daemon."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from client.api import Client


def register(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser("doctor", help="check the set-up; each check prints ok or a hint; exit 1 when any fails")
    doctor.add_argument("--json", action="store_true", help="also print the checks as JSON on stdout")
    doctor.add_argument("--fix", action="store_true",
                        help="remove the leftovers it lists (engine objects of daemons that are gone)")
    doctor.set_defaults(func=doctor_cmd, needs_daemon=False)


async def doctor_cmd(args: argparse.Namespace, client: Client) -> int:
    from daemon import __version__

    from client.console import emit
    from client.setup.doctor import run_checks

    client.max_attempts = 1  # a diagnosis reports an unreachable daemon at once rather than waiting it out
    checks = await run_checks(client, Path.cwd(), __version__, fix=args.fix)
    for check in checks:
        print(check.line(), file=sys.stderr, flush=True)
    if args.json:
        emit({"ok": all(c.ok for c in checks), "checks": [c.as_dict() for c in checks]})
    return 0 if all(c.ok for c in checks) else 1
