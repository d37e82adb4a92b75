"""`svc traces import FILE`: read an ATIF trajectory (a Harbor agent's `trajectory.json`, any ATIF-v1.0 to
v1.8 document) into a trace, filed under a run (`--run`) or an experiment (`--experiment`, `--scenario`),
so svc's judges and score rules score it (`svc eval score EXP`). The daemon validates the document and
answers 400 naming the field that is wrong; the file is read here and sent as it is."""
from __future__ import annotations

import argparse
import json
import os
import sys

from client.api import Client
from client.routes import R

MAX_FILE_BYTES = 16 * 1024 * 1024  # the daemon's cap (daemon/api/atif.py)


def register(sub: argparse._SubParsersAction) -> None:
    traces = sub.add_parser("traces", help="traces: import an ATIF trajectory recorded elsewhere")
    actions = traces.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = actions.add_parser("import", help="read an ATIF trajectory file (FILE.atif.json, a Harbor trajectory.json) "
                                            "into a trace of a run or an experiment")
    imp.add_argument("file", help="the ATIF JSON file ('-' for stdin)")
    imp.add_argument("--run", dest="run_id", help="file the trace under this run (and its experiment and scenario)")
    imp.add_argument("--experiment", dest="experiment_id", help="file the trace under this experiment")
    imp.add_argument("--scenario", dest="scenario_id", help="and this scenario of it")
    imp.add_argument("--json", action="store_true", help="print the daemon's answer as JSON")
    imp.set_defaults(func=import_trajectory)


def _read(path: str) -> bytes:
    from client.console import CliError

    if path == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    else:
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                raise CliError(f"{path} is larger than {MAX_FILE_BYTES} bytes, the most the daemon reads")
            with open(path, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CliError(f"{path} is larger than {MAX_FILE_BYTES} bytes, the most the daemon reads")
    return data


async def import_trajectory(args, client: Client) -> int:
    data = _read(args.file)
    query = {"run_id": args.run_id, "experiment_id": args.experiment_id, "scenario_id": args.scenario_id}
    answer = await client.call(R.IMPORT_TRAJECTORY, data=data, query=query, headers={"Content-Type": "application/json"})
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0
    where = (f"run {answer['run_id']}" if answer.get("run_id") else
             f"experiment {answer['experiment_id']}" if answer.get("experiment_id") else "no run or experiment")
    print(f"imported {answer['steps']} steps of {answer['agent']} as trace {answer['trace_id']} "
          f"({answer['events']} events, filed under {where})")
    return 0
