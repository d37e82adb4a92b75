"""`svc runs create|get|list|replay|cancel|stream|trajectory|export`.

`svc runs create --spec ID --seed S --wait` is also the reproducer every failed scenario carries:
it replays that exact scenario (spec version, seed, inputs, matrix entry) and exits 0 only when the
run passed.

Secrets: the daemon resolves only `dashboard` secrets and the values sent to it, so these commands
resolve every other declared source here (client/local_spec.py). Given a spec id, the spec's YAML
is fetched and relative `file:` paths and `command:` sources resolve against the current
directory; given a spec file (`svc runs create spec.yaml`), against the spec file's directory (and
the file is uploaded with its fixture files as a new version). `--secret NAME=VALUE` wins.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from client.api import ApiError, Client
from client.routes import R

TERMINAL = ("passed", "failed", "errored")
MARKS = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}


def register(sub: argparse._SubParsersAction) -> None:
    runs = sub.add_parser("runs", help="agent runs: create, follow, replay, cancel")
    actions = runs.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="run a spec once (exit 0 only when it passed, with --wait)")
    create.add_argument("spec_id", nargs="?", help="the spec id (or --spec), or a spec file (SPEC.yaml: uploaded first)")
    create.add_argument("--spec", dest="spec_opt", metavar="ID", help="the spec id, or a spec file")
    create.add_argument("--spec-version", type=int, help="default: the latest version")
    create.add_argument("--seed", help="replays a prior run's sandbox")
    create.add_argument("--inputs", help="JSON object for {{ name }} in the task prompt")
    create.add_argument("--matrix", help="JSON object of matrix parameters")
    create.add_argument("--sandbox", help="run in this live sandbox instead of a fresh one")
    create.add_argument("--secret", action="append", default=[], metavar="NAME=VALUE", help="a secret value (repeatable)")
    create.add_argument("--pin-agent", metavar="SNAPSHOT_ID",
                        help="run this agent snapshot instead of the latest of the spec's agent.snapshot name")
    create.add_argument("--replay-models", metavar="RECORDING",
                        help="the model gateway answers from this recording (sha256; a reproducer's) instead of the providers")
    create.add_argument("--no-local-secrets", action="store_true",
                        help="send only --secret values (the daemon resolves only dashboard secrets: any other declared "
                             "secret not given fails the boot)")
    _wait_flags(create)
    create.set_defaults(func=create_run)

    get = actions.add_parser("get", help="one run")
    get.add_argument("run_id")
    get.set_defaults(func=get_run)

    ls = actions.add_parser("list", help="runs, newest first")
    for name in ("status", "spec-id", "experiment-id", "sandbox-id"):
        ls.add_argument(f"--{name}")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=list_runs)

    replay = actions.add_parser("replay", help="run again with the same spec version, seed and inputs")
    replay.add_argument("run_id")
    replay.add_argument("--secret", action="append", default=[], metavar="NAME=VALUE")
    replay.add_argument("--no-local-secrets", action="store_true", help="send only --secret values")
    replay.add_argument("--models", choices=("recorded", "live"), default="recorded",
                        help="recorded (default): the model gateway replays the run's recorded answers; live: ask the providers")
    _wait_flags(replay)
    replay.set_defaults(func=replay_run)

    cancel = actions.add_parser("cancel", help="cancel a queued or running run")
    cancel.add_argument("run_id")
    cancel.set_defaults(func=cancel_run)

    stream = actions.add_parser("stream", help="follow a run's events (NDJSON on stdout) until it ends")
    stream.add_argument("run_id")
    stream.set_defaults(func=stream_run)

    trajectory = actions.add_parser("trajectory", help="download a run's full trajectory JSON")
    trajectory.add_argument("run_id")
    trajectory.add_argument("-o", "--output", help="write to this file instead of stdout")
    trajectory.set_defaults(func=get_trajectory)

    export = actions.add_parser("export", help="write a finished run as a file: --atif for an ATIF trajectory (Harbor's "
                                               "format, with svc's verdict, invariants, cost and effects under extra.svc)")
    export.add_argument("run_id")
    export.add_argument("--atif", action="store_true",
                        help="an ATIF-v1.8 trajectory (default: svc's own trajectory JSON, as `svc runs trajectory`)")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(func=export_run)

    from client.commands import effects

    effects.register(actions)


def _wait_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true", help="follow the run to its end and print the final Run")
    parser.add_argument("--wait-timeout", default="10m", help="give up waiting after this long (default 10m)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _json_object(raw: str | None, flag: str) -> dict | None:
    from client.console import CliError

    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise CliError(f"{flag} is not valid JSON: {exc}")
    if not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object")
    return value


def _secrets(pairs: list[str]) -> dict[str, str]:
    from client.console import CliError

    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--secret expects NAME=VALUE, got {pair!r}")
        out[name] = value
    return out


async def local_secrets(client: Client, spec_id: str, version: int | None, skip: set[str] | None = None) -> dict[str, str]:
    """The stored spec's declared secrets (every source but `dashboard`), resolved here with the
    client's one resolver, relative to the current directory."""
    from client.console import CliError
    from client.local_spec import SecretResolutionError, stored_spec_secrets

    try:
        return await stored_spec_secrets(client, spec_id, version, skip=frozenset(skip or ()))
    except SecretResolutionError as exc:
        raise CliError(f"{exc} (svc resolves spec secrets on this machine, relative to the current directory for a "
                       "stored spec; pass --secret NAME=VALUE to give it)")


async def prepared_spec(client: Client, spec: str, version: int | None, explicit: dict[str, str],
                        resolve: bool) -> dict[str, Any]:
    """`local_spec.prepare_spec` for a command: a spec file is uploaded, a stored id fetched; the
    secrets it declares are resolved here (explicit `--secret` values win). Errors become CliError."""
    from client.console import CliError
    from client.local_spec import SecretResolutionError, SpecFilesError, prepare_spec

    try:
        prepared = await prepare_spec(client, spec, version, skip=set(explicit), resolve=resolve)
    except SecretResolutionError as exc:
        raise CliError(f"{exc} (svc resolves spec secrets on this machine: relative to the spec file's directory, or to "
                       "the current directory for a stored spec id; pass --secret NAME=VALUE to give it)")
    except (SpecFilesError, OSError) as exc:
        raise CliError(f"{spec}: {exc}")
    return {**prepared, "secrets": {**prepared["secrets"], **explicit}}


def progress(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind == "step":
        return f"  {event['action']:<10} {event['latency_ms']:>7} ms"
    if kind == "invariant_result":
        return f"  {MARKS.get(event['status'], event['status'])} {event['invariant_id']}"
    if kind == "tool_call":
        return f"  tool {event.get('tool')} {event.get('phase')} {event.get('status') or ''}".rstrip()
    if kind == "error":
        return f"  error {event.get('error')}: {event.get('message')}"
    if kind == "done":
        score = event.get("score")
        return f"  {event['status']}" + (f" (score {score:.3f})" if isinstance(score, (int, float)) else "")
    return None


async def follow(client: Client, run: dict, args) -> int:
    """Follow the run's stream to its end, then print the final Run; 0 only when it passed."""
    from client.console import CliError, emit, say
    from daemon.spec import parse_duration

    timeout = parse_duration(args.wait_timeout)
    if not args.quiet:
        say(f"run {run['id']} (spec {run['spec_id']} v{run['spec_version']}, seed {run['seed']})")

    async def watch() -> None:
        try:
            async for event in client.stream(R.STREAM_RUN, run_id=run["id"]):
                line = progress(event)
                if line and not args.quiet:
                    say(line)
                if event.get("type") == "done":
                    return
        except ApiError:
            pass
        while (await client.call(R.GET_RUN, run_id=run["id"]))["status"] not in TERMINAL:
            await asyncio.sleep(1)

    try:
        await asyncio.wait_for(watch(), timeout)
    except asyncio.TimeoutError:
        raise CliError(f"run {run['id']} did not finish within {args.wait_timeout}; `svc runs get {run['id']}` to check later")
    final = await client.call(R.GET_RUN, run_id=run["id"])
    emit(final)
    if final["status"] != "passed" and not args.quiet:
        say(f"reproduce: {final['reproducer']['command']}")
    return 0 if final["status"] == "passed" else 1


async def create_run(args, client: Client) -> int:
    from client.console import CliError, emit

    spec_id = args.spec_opt or args.spec_id
    if not spec_id:
        raise CliError("which spec? pass SPEC_ID or --spec ID")
    if args.spec_opt and args.spec_id and args.spec_opt != args.spec_id:
        raise CliError(f"two different specs given: {args.spec_id} and --spec {args.spec_opt}")
    prepared = await prepared_spec(client, spec_id, args.spec_version, _secrets(args.secret), not args.no_local_secrets)
    spec_id, args.spec_version = prepared["spec_id"], prepared["spec_version"]
    secrets = prepared["secrets"]
    body: dict[str, Any] = {"spec_id": spec_id}
    for key, value in (("spec_version", args.spec_version), ("seed", args.seed), ("sandbox_id", args.sandbox),
                       ("inputs", _json_object(args.inputs, "--inputs")), ("matrix_entry", _json_object(args.matrix, "--matrix")),
                       ("secrets", secrets or None)):
        if value is not None:
            body[key] = value
    pins = {k: v for k, v in (("agent_snapshot_id", args.pin_agent), ("model_recording", args.replay_models)) if v}
    if pins:
        body["pins"] = pins
    run = await client.call(R.CREATE_RUN, body=body)
    if not args.wait:
        emit(run)
        return 0
    return await follow(client, run, args)


async def get_run(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.GET_RUN, run_id=args.run_id))
    return 0


async def list_runs(args, client: Client) -> int:
    from client.console import emit

    params = {"status": args.status, "spec_id": args.spec_id, "experiment_id": args.experiment_id,
              "sandbox_id": args.sandbox_id, "limit": args.limit}
    emit(await client.call(R.LIST_RUNS, query=params))
    return 0


async def replay_run(args, client: Client) -> int:
    from client.console import emit

    secrets = _secrets(args.secret)
    if not args.no_local_secrets:
        original = await client.call(R.GET_RUN, run_id=args.run_id)
        skip = set(secrets)
        if args.models == "recorded" and ((original.get("models") or {}).get("recording")):
            # the model gateway answers from the recording: the provider keys only it uses are not asked for
            skip |= await gateway_only_secrets(client, original["spec_id"], original["spec_version"])
        secrets = {**await local_secrets(client, original["spec_id"], original["spec_version"], skip), **secrets}
    run = await client.call(R.REPLAY_RUN, body={"secrets": secrets} if secrets else None, run_id=args.run_id,
                            query={"models": args.models})
    if not args.wait:
        emit(run)
        return 0
    return await follow(client, run, args)


async def gateway_only_secrets(client: Client, spec_id: str, version: int | None) -> set[str]:
    """The secrets a stored spec names as its `models:` providers' keys (the model gateway's alone)."""
    import yaml

    record = await client.call(R.GET_SPEC, query={"version": version} if version else None, spec_id=spec_id)
    try:
        doc = yaml.safe_load(record.get("yaml") or "")
    except yaml.YAMLError:
        return set()
    providers = ((doc or {}).get("models") or {}).get("providers") if isinstance(doc, dict) else None
    if not isinstance(providers, dict):
        return set()
    return {str(p["key"]) for p in providers.values() if isinstance(p, dict) and p.get("key")}


async def cancel_run(args, client: Client) -> int:
    from client.console import emit

    run = await client.call(R.CANCEL_RUN, run_id=args.run_id)
    print(f"run {run['id']} is {run['status']}", file=sys.stderr)
    emit(run)
    return 0


async def stream_run(args, client: Client) -> int:
    async for event in client.stream(R.STREAM_RUN, run_id=args.run_id):
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    return 0


async def get_trajectory(args, client: Client) -> int:
    from client.console import CliError

    run = await client.call(R.GET_RUN, run_id=args.run_id)
    url = run.get("trajectory_url")
    if not url:
        raise CliError(f"run {args.run_id} has no trajectory yet (it is {run['status']})")
    path = url.split("://", 1)[1].split("/", 1)[1] if "://" in url else url.lstrip("/")
    data = await client.request("GET", "/" + path, raw=True)
    if args.output:
        with open(args.output, "wb") as fh:
            fh.write(data)
        print(f"wrote {len(data)} bytes to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode("utf-8", "replace") + "\n")
    return 0


async def export_run(args, client: Client) -> int:
    if not args.atif:
        return await get_trajectory(args, client)
    data = await client.call(R.GET_RUN_ATIF, run_id=args.run_id, raw=True)
    if args.output:
        with open(args.output, "wb") as fh:
            fh.write(data)
        print(f"wrote the ATIF trajectory of {args.run_id} ({len(data)} bytes) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode("utf-8", "replace") + "\n")
    return 0
