"""`svc spec check SPEC|TASK_DIR [--oracle SNAPSHOT] [-n 5]`: is each check of a spec worth trusting?

The spec runs N times with the oracle (an agent snapshot that does the task right) as its agent
and N times with a do-nothing agent, as two derived specs (`<id>.check-oracle`, `<id>.check-noop`:
the spec with only its `agent:` replaced, uploaded with the same fixture files and build context);
the i-th run of each has the seed `spec-check-<i>`. A Harbor task directory is checked as the spec
`svc tasks import` makes of it, its solution/solve.sh the oracle unless --oracle names a snapshot.
Per check:

* `ok`: passes the oracle every time and fails the noop every time;
* `flaky`: passes the oracle only some of the times;
* `broken`: fails the oracle every time (the check or the oracle is wrong);
* `vacuous`: passes the noop at least once (it does not tell doing the task from doing nothing).

Each verdict names the runs that show it. Exit 1 when any check is not `ok`. A run that errored
(infrastructure, boot) runs once more with its seed; each error's reason is reported (`errors`), and
a run that errors again is listed and counts for no check. `svc eval run --check-spec` runs this
first and stops before the experiment when it fails.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import re
import time
from pathlib import Path
from typing import Any

from client.api import Client
from client.routes import R
from client.spec_reports import save_report

TERMINAL = ("passed", "failed", "errored")
NOOP_TIMEOUT = "60s"
POLL_S = 0.5
SNAPSHOT_ID = re.compile(r"^snap_[0-9a-f]{24}$")


def register_check(actions: argparse._SubParsersAction) -> None:
    check = actions.add_parser(
        "check", help="run the oracle and a do-nothing agent N times each; exit 1 when a check is flaky or vacuous")
    check.add_argument("file", metavar="SPEC|TASK_DIR", help="a spec file, or a Harbor task directory")
    check.add_argument("--oracle", metavar="SNAPSHOT",
                       help="an agent snapshot that solves the task (a name: its latest version, or a snap_... id); "
                            "a Harbor task's default is its solution/solve.sh")
    check.add_argument("-n", "--runs", type=int, default=5, help="runs of each agent (default 5)")
    check.add_argument("--timeout", dest="wait_s", type=float, default=1800.0,
                       help="seconds to wait for all the runs (default 1800)")
    check.set_defaults(func=check_command)


async def check_command(args, client: Client) -> int:
    from client.console import emit, say

    report = await check_spec(client, args.file, args.oracle, args.runs, wait_s=args.wait_s, progress=say)
    save_report(client.config.home, report)
    say(render(report))
    emit(report)
    return 0 if report["ok"] else 1


def derived(doc: dict[str, Any], role: str, oracle: str | None) -> dict[str, Any]:
    """The spec with its agent replaced: the oracle snapshot (none: the spec's own agent is the
    oracle, as a Harbor task's solve.sh), or an agent that exits at once."""
    out = copy.deepcopy(doc)
    agent = doc.get("agent") if isinstance(doc.get("agent"), dict) else {}
    kept = {k: agent[k] for k in ("env", "keep_running") if k in agent}
    if role == "oracle" and oracle is None:
        pass
    elif role == "oracle":
        ref = {"snapshot_id": oracle} if SNAPSHOT_ID.match(oracle or "") else {"snapshot": oracle}
        out["agent"] = {"type": "snapshot", **ref, **kept, **({"timeout": agent["timeout"]} if "timeout" in agent else {})}
    else:
        out["agent"] = {"type": "cli", "binary": "sh", "args": ["-c", "exit 0"], "timeout": NOOP_TIMEOUT}
    out["id"] = f"{doc['id']}.check-{role}"
    return out


def task_spec(path: str, oracle: str | None) -> tuple[dict[str, Any], Path, dict[str, tuple[bytes, int]]]:
    """A Harbor task directory's spec (its solution/solve.sh the agent unless `oracle` is given), the
    name it goes by (never opened: nothing is read from or written to the task under it) and its
    build context's files, read with no link followed (harbor.context_files)."""
    from client.console import CliError
    from daemon.tasks import harbor

    try:
        task = harbor.load(path)
        doc = harbor.to_spec(task, oracle=oracle is None)
        files = harbor.context_files(task)
    except (harbor.TaskError, OSError) as exc:
        raise CliError(str(exc))
    return doc, task.path / harbor.SPEC_NAME, files


async def check_spec(client: Client, path: str, oracle: str | None, n: int, *, wait_s: float = 1800.0,
                     progress: Any = None) -> dict[str, Any]:
    """`oracle` None: a Harbor task directory's solution/solve.sh (a spec file needs a snapshot)."""
    import yaml

    from client.console import CliError
    from client.local_spec import SpecFilesError, collect_files, declared_secrets, encode_files, resolve_secrets
    from daemon.tasks import harbor

    if n < 1:
        raise CliError("-n must be at least 1")
    task_files = None
    if harbor.is_task_dir(path):
        doc, spec_path, task_files = task_spec(path, oracle)
    elif not oracle:
        raise CliError(f"{path}: give --oracle SNAPSHOT (an agent snapshot that solves the task); only a Harbor task "
                       "directory has an oracle of its own (solution/solve.sh)")
    else:
        spec_path = Path(path)
        try:
            doc = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise CliError(f"{path}: cannot read the spec: {exc}")
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise CliError(f"{path}: not a spec (a mapping with an id)")
    try:
        if task_files is not None:  # a Harbor task declares no secrets (harbor.spec_yaml)
            files, secrets = task_files, {}
        else:
            files = collect_files(doc, spec_path.parent)
            secrets = resolve_secrets(declared_secrets(doc), spec_path.resolve().parent)
    except (SpecFilesError, ValueError) as exc:
        raise CliError(f"{path}: {exc}")
    records: dict[str, dict[str, Any]] = {}
    for role in ("oracle", "noop"):
        body: dict[str, Any] = {"name": f"{spec_path.stem} ({role})",
                                "yaml": yaml.safe_dump(derived(doc, role, oracle), sort_keys=False)}
        if files:
            body["files"] = encode_files(files)
        records[role] = await client.call(R.UPLOAD_SPEC, body=body)

    async def start(role: str, i: int) -> str:
        # the i-th run of each agent has the same seed, so a flaky check's run replays as it was
        record = records[role]
        run = await client.call(R.CREATE_RUN, body={"spec_id": record["id"], "spec_version": record["version"],
                                                    "seed": f"spec-check-{i}", **({"secrets": secrets} if secrets else {})})
        return str(run["id"])

    runs = {role: [await start(role, i) for i in range(n)] for role in records}
    if progress:
        progress(f"spec check: {n} oracle run(s) and {n} noop run(s) of '{doc['id']}' queued")
    deadline = time.monotonic() + wait_s
    ended = await wait_all(client, [r for ids in runs.values() for r in ids], deadline - time.monotonic())
    errors = {run_id: error_text(run) for run_id, run in ended.items() if run["status"] == "errored"}
    # An errored run (a boot or engine failure) says nothing about a check: it runs once more with its
    # seed, so one infrastructure hiccup does not leave a check without its evidence.
    again = {role: {i: await start(role, i) for i, run_id in enumerate(ids) if run_id in errors}
             for role, ids in runs.items()}
    if any(again.values()):
        if progress:
            progress(f"spec check: {len(errors)} errored run(s) run once more: {', '.join(errors)}")
        ended.update(await wait_all(client, [r for by_i in again.values() for r in by_i.values()],
                                    deadline - time.monotonic()))
        errors.update({run_id: error_text(ended[run_id]) for by_i in again.values() for run_id in by_i.values()
                       if ended[run_id]["status"] == "errored"})
        for role, by_i in again.items():
            for i, run_id in by_i.items():
                runs[role][i] = run_id
    report = summarize(doc["id"], oracle or "solution/solve.sh",
                       {role: [ended[r] for r in ids] for role, ids in runs.items()})
    report["errors"] = errors
    report["rerun"] = {role: [runs[role][i] for i in by_i] for role, by_i in again.items()}
    return report


def error_text(run: dict[str, Any]) -> str:
    error = run.get("error") or {}
    where = f"{error['step']}: " if error.get("step") else ""
    return where + str(error.get("message") or "errored (no reason recorded)")


async def wait_all(client: Client, run_ids: list[str], wait_s: float) -> dict[str, dict[str, Any]]:
    from client.console import CliError

    ended: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + wait_s
    while True:
        for run_id in run_ids:
            if run_id not in ended:
                run = await client.call(R.GET_RUN, run_id=run_id)
                if run["status"] in TERMINAL:
                    ended[run_id] = run
        if len(ended) == len(run_ids):
            return ended
        if time.monotonic() > deadline:
            left = [r for r in run_ids if r not in ended]
            raise CliError(f"spec check: {len(left)} run(s) still going after {wait_s:g}s: {', '.join(left)}")
        await asyncio.sleep(POLL_S)


def summarize(spec_id: str, oracle: str, by_role: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per check: the runs it passed and failed under each agent, and its verdict."""
    errored = {role: [r["id"] for r in rs if r["status"] == "errored"] for role, rs in by_role.items()}
    seen: dict[str, dict[str, dict[str, list[str]]]] = {}
    for role, rs in by_role.items():
        for run in rs:
            if run["status"] == "errored":
                continue
            for result in (run.get("invariant_results") or []) + (run.get("forbidden_results") or []):
                entry = seen.setdefault(result["invariant_id"], {"oracle": {"passed": [], "failed": []},
                                                                 "noop": {"passed": [], "failed": []}})
                entry[role]["passed" if result["status"] == "passed" else "failed"].append(run["id"])
    checks = []
    for check_id, entry in seen.items():
        oracle_runs, noop_runs = entry["oracle"], entry["noop"]
        if noop_runs["passed"]:
            verdict, evidence = "vacuous", {"passed_noop": noop_runs["passed"]}
        elif oracle_runs["passed"] and oracle_runs["failed"]:
            verdict, evidence = "flaky", {"passed_oracle": oracle_runs["passed"], "failed_oracle": oracle_runs["failed"]}
        elif oracle_runs["failed"]:
            verdict, evidence = "broken", {"failed_oracle": oracle_runs["failed"]}
        elif not oracle_runs["passed"]:
            verdict, evidence = "unknown", {}  # every oracle run errored
        else:
            verdict, evidence = "ok", {}
        checks.append({"check": check_id, "verdict": verdict, "oracle": oracle_runs, "noop": noop_runs, "shown_by": evidence})
    no_runs = not any(r["status"] != "errored" for r in by_role.get("oracle", []))
    return {"spec_id": spec_id, "oracle": oracle, "runs": {role: len(rs) for role, rs in by_role.items()},
            "errored_runs": errored, "checks": checks,
            "ok": bool(checks) and not no_runs and all(c["verdict"] == "ok" for c in checks)}


def render(report: dict[str, Any]) -> str:
    """The report in lines (stderr; the JSON goes to stdout)."""
    n = report["runs"]
    lines = [f"spec check of '{report['spec_id']}' ({n.get('oracle', 0)} oracle run(s) with {report['oracle']}, "
             f"{n.get('noop', 0)} noop run(s)):"]
    words = {"ok": "passes the oracle every time, fails the noop every time", "flaky": "FLAKY on the oracle",
             "broken": "FAILS the oracle every time", "vacuous": "VACUOUS: passes the noop",
             "unknown": "no oracle run finished"}
    for c in report["checks"]:
        o, z = c["oracle"], c["noop"]
        shown = "; ".join(f"{k.replace('_', ' ')}: {', '.join(v)}" for k, v in c["shown_by"].items())
        lines.append(f"  {c['check']}: {words[c['verdict']]} (oracle {len(o['passed'])}/{len(o['passed']) + len(o['failed'])}, "
                     f"noop {len(z['passed'])}/{len(z['passed']) + len(z['failed'])} passed)" + (f" [{shown}]" if shown else ""))
    errors = report.get("errors") or {}
    for run_id, reason in errors.items():
        lines.append(f"  {run_id} errored: {reason}")
    for role, ids in report["errored_runs"].items():
        if ids:
            lines.append(f"  errored {role} run(s) after one more try, counted for no check: {', '.join(ids)}")
    lines.append("spec check: ok" if report["ok"] else "spec check: FAILED (a check is flaky, broken or vacuous)")
    return "\n".join(lines)
