"""`svc runs effects RUN` (the run's effect ledger) and `svc runs diff A B` (what differs between two
runs' effects): a table on stdout, or the daemon's JSON with --json."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from client.api import Client
from client.routes import R
from client.terminal import printable


def register(actions: argparse._SubParsersAction) -> None:
    """Adds `effects` and `diff` to `svc runs` (client/commands/runs.py)."""
    effects = actions.add_parser("effects", help="what a run changed: db writes, HTTP and model calls, files, processes")
    effects.add_argument("run_id")
    effects.add_argument("--json", action="store_true", help="print the ledger as JSON instead of a table")
    effects.set_defaults(func=run_effects)

    diff = actions.add_parser("diff", help="what differs between two runs' effects (A B)")
    diff.add_argument("run_a")
    diff.add_argument("run_b")
    diff.add_argument("--json", action="store_true", help="print the differences as JSON instead of lines")
    diff.set_defaults(func=run_diff)


def _out(line: str = "") -> None:
    sys.stdout.write(printable(line) + "\n")


def _json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def key_text(effect: dict[str, Any]) -> str:
    """A db effect's changed rows by primary key: `id=3,4` (`,…` when more rows changed than the
    daemon listed); empty for a table without a primary key."""
    columns, keys = effect.get("key_columns") or [], effect.get("keys") or []
    if not columns or not keys:
        return ""
    name = columns[0] if len(columns) == 1 else "(" + ", ".join(columns) + ")"
    return f"{name}={','.join(keys)}{',…' if effect.get('keys_more') else ''}"


def ledger_lines(ledger: dict[str, Any]) -> list[str]:
    sources = ledger["sources"]
    lines = [f"run {ledger['run_id']} ({ledger['status']}, spec {ledger['spec_id']} v{ledger['spec_version']}; "
             f"{'while the agent ran' if ledger['window'] == 'agent' else 'the whole run'})"]
    sections = [
        ("database writes", sources["db"], "audit.db_writes is off",
         ["service", "table", "operation", "rows", "transactions", "keys"],
         [[d["service"], d["table"], d["operation"], "?" if d["rows"] is None else str(d["rows"]), str(d["transactions"]),
           key_text(d)] for d in ledger["db"]]),
        ("HTTP calls", sources["http"], "audit.http_calls is off", ["method", "host", "path", "calls", "statuses"],
         [[h["method"], h["host"], h["path"], str(h["calls"]), " ".join(f"{k}:{v}" for k, v in h["statuses"].items())]
          for h in ledger["http"]]),
        ("model calls", sources["models"], "", ["model", "calls", "errors", "tokens in", "tokens out", "cost usd"],
         [[m["model"], str(m["calls"]), str(m["errors"]), str(m["input_tokens"]), str(m["output_tokens"]),
           "?" if m["cost_usd"] is None else f"{m['cost_usd']:.6f}"] for m in ledger["models"]]),
        ("files", sources["workspace_files"] or sources["container_files"], "no file diff or watcher was recorded",
         ["change", "where", "path"], [[f["change"], f["where"], f["path"]] for f in ledger["files"]]),
        ("processes", sources["processes"], "audit.process_spawns is off", ["runs", "exit codes", "command"],
         [[str(p["count"]), " ".join("?" if c is None else str(c) for c in p["exit_codes"]), p["command"]]
          for p in ledger["processes"]]),
    ]
    for title, known, why, head, rows in sections:
        if not known:
            lines.append(f"{title}: not recorded ({why})")
        elif not rows:
            lines.append(f"{title}: none")
        else:
            lines += [f"{title}:", *table([head, *rows])]
    return lines + [f"note: {n}" for n in ledger.get("notes") or []]


async def run_effects(args: argparse.Namespace, client: Client) -> int:
    ledger = await client.call(R.GET_RUN_EFFECTS, run_id=args.run_id)
    if args.json:
        _json(ledger)
    else:
        for line in ledger_lines(ledger):
            _out(line)
    return 0


async def run_diff(args: argparse.Namespace, client: Client) -> int:
    result = await client.call(R.DIFF_RUN_EFFECTS, run_id=args.run_a, query={"other": args.run_b})
    if args.json:
        _json(result)
        return 0
    differences = result["differences"]
    _out(f"A = {result['a']}, B = {result['b']}: " + (f"{len(differences)} effect(s) differ" if differences else "the same effects"))
    for item in differences:
        _out(f"  {item['message']}")
    if result["unknown"]:
        _out(f"not compared (not recorded in both): {', '.join(result['unknown'])}")
    return 0
