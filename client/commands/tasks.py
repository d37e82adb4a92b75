"""svc tasks: Harbor tasks (task.toml, instruction.md, environment/, tests/test.sh, solution/solve.sh)
as svc specs: import them (one spec per task, with the environment/ build context uploaded), export a
spec as a Harbor task directory. The mapping is daemon/tasks/harbor.py."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

from client.api import Client
from client.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:
    tasks = sub.add_parser("tasks", help="Harbor tasks: import task directories as specs, export a spec as a task")
    actions = tasks.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = actions.add_parser("import", help="store each Harbor task as a spec; prints the spec ids (JSON)",
                             description="Each PATH is a Harbor task directory or a directory of them. Every task becomes "
                                         "a spec (instruction.md the prompt, environment/ a Dockerfile build, tests/test.sh "
                                         "the verifier whose reward must be 1) uploaded with its build context. Prints "
                                         "{tasks: [{path, spec_id, version, unmapped}]} on stdout; `unmapped` names what "
                                         "of the task has no svc equivalent.")
    imp.add_argument("paths", nargs="+", metavar="PATH")
    imp.add_argument("--oracle", action="store_true", help="the spec's agent is the task's solution/solve.sh")
    imp.set_defaults(func=tasks_import)
    run = actions.add_parser("run", help="run Harbor task directories with an agent; per-task report (JSON); exit 1 unless all pass",
                             description="Each PATH is a Harbor task directory or a directory of them. Every task's generated "
                                         "spec (as `svc tasks import` makes it) runs with the agent given: one experiment per "
                                         "task, at once. A task that cannot run is listed with its reason and the others run. "
                                         "Prints {tasks: [{task, spec_id, experiment_id, status, verdict, score, reason?}]}.")
    run.add_argument("paths", nargs="+", metavar="PATH")
    run.add_argument("--agent", required=True, metavar="AGENT",
                     help="oracle (the task's solution/solve.sh), installed:NAME@VERSION (claude-code, codex or "
                          "mini-swe-agent; with --model, its provider key read from this environment), "
                          "snapshot:NAME (an uploaded agent) or cli:COMMAND (a shell command in the sandbox)")
    run.add_argument("--model", help="with --agent installed:...: the model it calls")
    run.add_argument("--max-turns", type=int, metavar="N", help="with --agent installed:...: its turn limit")
    run.add_argument("--keep-agent-processes", action="store_true",
                     help="keep what the agent started running while test.sh runs, as Harbor does")
    run.add_argument("--replicas", type=int, metavar="N", help="runs of each task")
    run.add_argument("--poll", type=float, default=2.0, metavar="SECONDS", help="poll interval (default 2)")
    run.add_argument("--wait-timeout", type=float, default=3600.0, metavar="SECONDS", help="give up waiting after (default 3600)")
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML (one testcase per task)")
    run.add_argument("--markdown", metavar="PATH", help="write a Markdown table of the tasks (a pull-request comment)")
    run.add_argument("--quiet", "-q", action="store_true", help="no JSON on stdout: only the summary line and the exit code")
    run.set_defaults(func=tasks_run)
    exp = actions.add_parser("export", help="write a spec (a local file or a stored id) as a Harbor task directory",
                             description="Writes instruction.md, task.toml, environment/ (the build context, or a "
                                         "Dockerfile FROM the base image) and tests/test.sh (reward 1 when every "
                                         "command_exit check passes). Prints what could not be exported (JSON).")
    exp.add_argument("spec", metavar="SPEC.yaml|SPEC_ID")
    exp.add_argument("out", metavar="DIR")
    exp.add_argument("--spec-version", type=int, default=None)
    exp.set_defaults(func=tasks_export)


async def tasks_import(args: argparse.Namespace, client: Client) -> int:
    from client.console import CliError
    from client.local_spec import SpecFilesError, upload_spec_file
    from daemon.tasks import harbor

    try:
        dirs = [d for path in args.paths for d in harbor.task_dirs(path)]
        loaded = [harbor.load(d) for d in dirs]
    except harbor.TaskError as exc:
        raise CliError(str(exc))
    out = []
    for task in loaded:
        try:
            text = harbor.spec_yaml(task, oracle=args.oracle)
            with harbor.staged(task, text) as spec_path:  # a private copy: nothing read from the task again
                record = await upload_spec_file(client, spec_path, task.name, text)
        except (harbor.TaskError, SpecFilesError, OSError) as exc:
            raise CliError(f"{task.path}: {exc}")
        out.append({"path": str(task.path), "spec_id": record["id"], "version": record["version"], "unmapped": task.unmapped})
        for note in task.unmapped:
            print(printable(f"svc: {task.name}: not mapped: {note}"), file=sys.stderr)
    print(json.dumps({"tasks": out}, indent=2))
    return 0


async def tasks_run(args: argparse.Namespace, client: Client) -> int:
    """`svc tasks run PATH... --agent AGENT`: every task of PATH with that agent (run_staged_tasks)."""
    from client.console import CliError
    from daemon.tasks import harbor

    try:
        agent, trusted = harbor.agent_from_flag(args.agent, model=args.model, max_turns=args.max_turns)
        dirs = [d for path in args.paths for d in harbor.task_dirs(path)]
    except harbor.TaskError as exc:
        raise CliError(str(exc))
    keep = args.keep_agent_processes

    def make_text(task: harbor.HarborTask) -> str:
        if agent is None:
            return harbor.spec_yaml(task, oracle=True, keep_agent_processes=keep)
        return harbor.spec_yaml(task, agent=agent, keep_agent_processes=keep, trusted=trusted)

    def notes(task: harbor.HarborTask) -> list[str]:
        user = (task.config.get("agent") or {}).get("user")
        if agent is not None and user is not None:  # only the oracle's command can be run as another user
            return [f"task.toml [agent] user = {user!r}: the oracle runs as that user; --agent {args.agent} runs as "
                    "the image's USER"]
        return []

    with contextlib.ExitStack() as stack:
        return await _run_staged_task_dirs(args, client, dirs, stack, make_text, notes)


def is_task_dir(path: str) -> bool:
    """A Harbor task directory, or a directory of them."""
    from daemon.tasks import harbor

    p = Path(path)
    return harbor.is_task_dir(p) or (p.is_dir() and any(harbor.is_task_dir(d) for d in p.iterdir()))


async def run_task_dir(args: argparse.Namespace, client: Client, eval_run: Any) -> int:
    """`svc eval run TASK_DIR [--oracle]`: the task's generated spec, run by `eval_run` from a private
    directory of its own with a copy of environment/ (harbor.staged). Nothing is written into the task
    directory, and nothing there is read again: a task directory is someone else's, and an
    svc-task.yaml it ships (or a link planted under that name) must lead nowhere."""
    from client.console import CliError
    from daemon.tasks import harbor

    if not harbor.is_task_dir(args.spec):
        return await run_task_dirs(args, client)
    try:
        task = harbor.load(args.spec)
        if args.oracle is None:
            raise harbor.TaskError(f"{args.spec}: a Harbor task directory runs with --oracle (its solution/solve.sh); "
                                   f"to run it with your agent: `svc tasks run {args.spec} --agent AGENT` "
                                   f"(AGENT: {harbor.AGENT_FORMS})")
        if args.oracle:
            raise harbor.TaskError("--oracle takes no value with a task directory: its solution/solve.sh is the oracle")
        text = harbor.spec_yaml(task, oracle=True, keep_agent_processes=getattr(args, "keep_agent_processes", False))
    except harbor.TaskError as exc:
        raise CliError(str(exc))
    for note in task.unmapped:
        print(printable(f"svc: {task.name}: not mapped: {note}"), file=sys.stderr)
    with contextlib.ExitStack() as stack:
        try:
            path = stack.enter_context(harbor.staged(task, text))
        except (harbor.TaskError, OSError) as exc:
            raise CliError(f"{task.path}: {exc}")
        # --check-spec ran on the task directory already (eval_run's first call)
        inner = argparse.Namespace(**{**vars(args), "spec": str(path), "name": args.name or task.name, "check_spec": False})
        return await eval_run(inner, client)


async def run_task_dirs(args: argparse.Namespace, client: Client) -> int:
    """`svc eval run DIR --oracle` on a directory of Harbor tasks: one experiment per task (each its
    own image), run at once and waited for together. Every task is reported: one that cannot run (no
    solve.sh, a refused spec, an upload the daemon refused) is a row with status `not_run` and its
    reason, and the others run. {tasks: [{task, spec_id, experiment_id, status, verdict, score,
    reason?}]} on stdout; exit 1 unless every task passed."""
    from client.console import CliError
    from daemon.tasks import harbor

    if args.oracle != "":
        raise CliError(f"{args.spec}: a directory of Harbor tasks runs with --oracle (each task's solution/solve.sh)")
    try:
        dirs = harbor.task_dirs(args.spec)
    except harbor.TaskError as exc:
        raise CliError(str(exc))
    keep = getattr(args, "keep_agent_processes", False)
    with contextlib.ExitStack() as stack:  # each task's private spec directory, removed when all are done
        return await _run_staged_task_dirs(args, client, dirs, stack,
                                           lambda task: harbor.spec_yaml(task, oracle=True, keep_agent_processes=keep))


async def _run_staged_task_dirs(args: argparse.Namespace, client: Client, dirs: list[Path], stack: Any,
                                make_text: Callable[[Any], str], notes: Callable[[Any], list[str]] | None = None) -> int:
    import asyncio

    from client.console import CliError
    from client.eval_flow import SpecFileError, WaitTimeout, start_spec_file, wait_for_experiment
    from daemon.tasks import harbor

    rows: list[dict[str, Any]] = []
    started: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for d in dirs:
        row: dict[str, Any] = {"task": d.name, "spec_id": None, "experiment_id": None, "status": "not_run",
                               "verdict": None, "score": None}
        rows.append(row)
        try:
            task = harbor.load(d)
            text = make_text(task)
            path = stack.enter_context(harbor.staged(task, text))  # private: nothing read from the task again
        except (harbor.TaskError, OSError) as exc:
            row["reason"] = str(exc)
            print(printable(f"svc: {d.name}: not run: {exc}"), file=sys.stderr)
            continue
        for note in [*task.unmapped, *(notes(task) if notes else [])]:
            print(printable(f"svc: {task.name}: not mapped: {note}"), file=sys.stderr)
        try:
            start = await start_spec_file(client, path, name=task.name, replicas=args.replicas, text=text)
        except (SpecFileError, CliError) as exc:
            row["reason"] = str(exc)
            print(printable(f"svc: {d.name}: not run: {exc}"), file=sys.stderr)
            continue
        except Exception as exc:  # noqa: BLE001 - the daemon refused this task's spec: the others still run
            row["reason"] = f"{type(exc).__name__}: {exc}"
            print(printable(f"svc: {d.name}: not run: {row['reason']}"), file=sys.stderr)
            continue
        row.update(spec_id=start["spec"]["id"], experiment_id=start["experiment"]["id"], status="running")
        started.append((row, start))
    try:
        results = await asyncio.gather(*(wait_for_experiment(client, s["experiment"]["id"], poll_s=args.poll,
                                                             wait_timeout_s=args.wait_timeout) for _, s in started))
    except WaitTimeout as exc:
        raise CliError(str(exc))
    for (row, _), result in zip(started, results):
        scenario = (result.get("scenarios") or [{}])[0]
        row.update(status=result.get("status"), verdict=scenario.get("verdict"), score=scenario.get("score"))
    if not args.quiet:
        print(json.dumps({"tasks": rows}, indent=2))
    write_task_reports(args, rows)
    passed = sum(r["verdict"] == "pass" for r in rows)
    not_run = sum(r["status"] == "not_run" for r in rows)
    print(f"svc: {passed}/{len(rows)} tasks passed" + (f", {not_run} not run" if not_run else ""), file=sys.stderr)
    return 0 if passed == len(rows) else 1


def write_task_reports(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """--junit / --markdown of a run of task directories: one testcase / one table row per task."""
    from client.reports import tasks_junit, tasks_markdown

    if getattr(args, "junit", None):
        Path(args.junit).write_bytes(tasks_junit(rows))
    if getattr(args, "markdown", None):
        Path(args.markdown).write_text(tasks_markdown(rows))


async def tasks_export(args: argparse.Namespace, client: Client) -> int:
    import yaml

    from client.local_spec import collect_files, is_spec_file
    from client.routes import R
    from daemon.tasks import harbor

    files: dict[str, bytes] = {}
    notes: list[str] = []
    if is_spec_file(args.spec):  # a local spec: its build context is read next to it
        path = Path(args.spec)
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        files = {key: data for key, (data, _mode) in collect_files(doc, path.parent).items()}
    else:
        params = {"version": args.spec_version} if args.spec_version else None
        record = await client.call(R.GET_SPEC, query=params, spec_id=args.spec)
        doc = yaml.safe_load(record.get("yaml") or "") or {}
        if record.get("files"):
            notes.append("the daemon does not hand back uploaded files: environment/ holds only what the spec names; "
                         "export the local SPEC.yaml to include its build context")
    notes = harbor.export(doc, files, Path(args.out)) + notes
    print(json.dumps({"path": args.out, "not_exported": notes}, indent=2))
    return 0
