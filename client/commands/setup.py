"""`svc setup [PHASE]`: wire this project and its editor agents to svc in seven idempotent phases
(skills, mcp, spec, instrument, install, snapshot, doctor). Each phase shows its diff on stderr, then
applies it (not with --dry-run; `instrument` only with --apply). stdout: a JSON summary. Exit 1 when a
phase failed or a file was refused (an MCP config svc cannot parse: the snippet to add is printed)."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from client.api import Client
from client.setup.phases import PHASES, Options, run_phase
from client.setup.plan import AGENTS, detect_agents, parse_agents


def register(sub: argparse._SubParsersAction) -> None:
    setup = sub.add_parser("setup", help="set up this project: skills, MCP config, starter spec, tracing, snapshot, doctor",
                           description=__doc__)
    setup.add_argument("phase", nargs="?", choices=PHASES, help="run only this phase (default: all seven in order)")
    setup.add_argument("--agents", metavar="LIST", help=f"comma list of {','.join(AGENTS)}, or all (default: the ones found, else claude)")
    setup.add_argument("--no-install-sdk", action="store_true", help="do not copy the tracing SDK into the project")
    setup.add_argument("--apply", action="store_true", help="make the instrument change (default: only show it)")
    setup.add_argument("--dry-run", action="store_true", help="show every change, write nothing, upload nothing")
    setup.add_argument("--status", action="store_true", help="report each phase's state (implies --dry-run)")
    setup.add_argument("--json", action="store_true", help="only the JSON summary (no diffs on stderr)")
    setup.add_argument("--dir", default=".", help="the project directory (default: the current one)")
    setup.add_argument("--entrypoint", help="the agent's command for the snapshot (default: python3 agent.py|main.py|app.py)")
    setup.set_defaults(func=setup_cmd)


async def setup_cmd(args: argparse.Namespace, client: Client) -> int:
    from daemon import __version__

    from client.console import CliError, emit

    project = Path(args.dir).resolve()
    if not project.is_dir():
        raise CliError(f"--dir {args.dir}: not a directory")
    home = Path.home()
    try:
        agents = parse_agents(args.agents) if args.agents else detect_agents(project, home)
    except ValueError as exc:
        raise CliError(str(exc))
    opts = Options(project=project, home=home, agents=agents, install_sdk=not args.no_install_sdk,
                   apply_instrument=args.apply, dry_run=args.dry_run or args.status,
                   entrypoint=shlex.split(args.entrypoint) if args.entrypoint else None, cli_version=__version__)
    quiet = args.json or args.status

    def say(text: str) -> None:
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    results = []
    for phase in [args.phase] if args.phase else PHASES:
        result = await run_phase(phase, opts, client)
        results.append(result)
        say(f"== {phase}: {result.status}")
        for change in result.changes:
            say(change.diff().rstrip("\n"))
        for note in result.notes:
            say(note)
    wrote = [r.phase for r in results if r.applied]
    summary = {"project": str(project), "agents": list(agents), "dry_run": opts.dry_run,
               "changed": wrote, "phases": [r.summary() for r in results]}
    emit(summary)
    if not args.status:
        say("svc: setup: " + outcome(results, opts))
    return 1 if any(r.failed or r.refused for r in results) else 0


def outcome(results: list, opts: Options) -> str:
    """The closing line: what changed (or would), what was refused or failed."""
    parts = []
    if opts.dry_run:  # instrument only suggests unless --apply
        would = [r.phase for r in results if r.status == "pending" and (r.phase != "instrument" or opts.apply_instrument)]
        parts.append(f"would change {', '.join(would)}" if would else "no change")
    else:
        wrote = [r.phase for r in results if r.applied]
        parts.append(f"changed {', '.join(wrote)}" if wrote else "no change")
    for status in ("refused", "failed"):
        names = [r.phase for r in results if r.status == status]
        if names:
            parts.append(f"{status} {', '.join(names)} (see above)")
    return "; ".join(parts)
