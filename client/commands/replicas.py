"""`svc replicas run|get|watch`: replica suites (flakiness of one spec over n seeds).

`svc replicas run` resolves the spec's declared secrets here (every source but `dashboard`; the
daemon resolves nothing else): for a spec id, from the stored YAML relative to the current
directory; for a spec file (SPEC.yaml, uploaded first with its fixture files), relative to it."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from client.api import Client
from client.routes import R


def register(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("replicas", help="replica suites: run a spec n times and measure flakiness")
    actions = rep.add_subparsers(dest="action", metavar="ACTION", required=True)

    run = actions.add_parser("run", help="start a suite of N replicas of a stored spec (2..1000); --wait follows it")
    run.add_argument("spec_id", help="a stored spec id, or a spec file (SPEC.yaml: uploaded first)")
    run.add_argument("-n", "--replicas", dest="n_replicas", type=int, required=True, metavar="N")
    run.add_argument("--spec-version", type=int)
    run.add_argument("--inputs", metavar="JSON", help="inputs object (JSON)")
    run.add_argument("--secret", action="append", default=[], metavar="NAME=VALUE", help="a secret value (repeatable)")
    run.add_argument("--no-local-secrets", action="store_true", help="send only --secret values")
    run.add_argument("--wait", action="store_true", help="follow the suite's stream until it is done; exit 1 unless it passed")
    run.set_defaults(func=replicas_run)

    get = actions.add_parser("get", help="a replica suite")
    get.add_argument("suite_id")
    get.set_defaults(func=replicas_get)

    watch = actions.add_parser("watch", help="follow a suite's replica stream (NDJSON on stdout) until it is done")
    watch.add_argument("suite_id")
    watch.set_defaults(func=replicas_watch)


async def replicas_run(args: argparse.Namespace, client: Client) -> int:
    from client.console import CliError, emit

    from client.commands.runs import _secrets, prepared_spec

    prepared = await prepared_spec(client, args.spec_id, args.spec_version, _secrets(args.secret), not args.no_local_secrets)
    body: dict[str, Any] = {"spec_id": prepared["spec_id"], "n_replicas": args.n_replicas}
    if prepared["spec_version"]:
        body["spec_version"] = prepared["spec_version"]
    secrets = prepared["secrets"]
    if secrets:
        body["secrets"] = secrets
    if args.inputs:
        try:
            body["inputs"] = json.loads(args.inputs)
        except ValueError as exc:
            raise CliError(f"--inputs is not JSON: {exc}")
    suite = await client.call(R.CREATE_REPLICAS, body=body)
    if not args.wait:
        emit(suite)
        return 0
    print(f"svc: suite {suite['id']}: {suite['n_replicas']} replicas of '{suite['spec_id']}'", file=sys.stderr, flush=True)
    final = await _follow(client, suite["id"], echo=False)
    emit(final)
    return 0 if final and final.get("strategy_passed") else 1


async def replicas_get(args: argparse.Namespace, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.GET_REPLICAS, suite_id=args.suite_id))
    return 0


async def replicas_watch(args: argparse.Namespace, client: Client) -> int:
    final = await _follow(client, args.suite_id, echo=True)
    return 0 if final and final.get("strategy_passed") else 1


async def _follow(client: Client, suite_id: str, echo: bool) -> dict[str, Any] | None:
    from client.progress import ProgressLine

    line = ProgressLine(f"svc: suite {suite_id}")
    total = (await client.call(R.GET_REPLICAS, suite_id=suite_id))["n_replicas"] if line.live else 0
    counts = {"passed": 0, "failed": 0, "errored": 0}
    final = None
    async for event in client.stream(R.STREAM_REPLICAS, suite_id=suite_id):
        if echo:
            sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        if event.get("type") == "replica":
            if event.get("status") in counts:
                counts[event["status"]] += 1
            if line.live:  # a terminal: one line rewritten in place; otherwise a plain line per replica
                line.update(sum(counts.values()), total, counts["passed"], counts["failed"], counts["errored"])
            else:
                print(f"svc: replica {event['index']} {event['status']} (score {event.get('score')}, seed {event['seed']})",
                      file=sys.stderr, flush=True)
        elif event.get("type") == "done":
            line.finish()
            final = event.get("suite")
            if final:
                print(f"svc: suite {suite_id} {final['status']}: verdict {final.get('verdict')}, passed {final['passed']},"
                      f" failed {final['failed']}, failure rate {final.get('failure_rate')}", file=sys.stderr, flush=True)
            break
    return final
