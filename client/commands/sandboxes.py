"""`svc sandboxes create|list|get|delete|exec|events|files|state|diff|timeout`.

`svc sandboxes create --spec ID|SPEC.yaml` resolves the spec's declared secrets here (every source
but `dashboard`; the daemon resolves nothing else): for a spec id from the stored YAML, relative to
the current directory; for a spec file (uploaded first, with its fixture files), relative to it."""
from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any

from client.api import Client
from client.routes import R

BOOT_TIMEOUT_S = 600.0


def register(sub: argparse._SubParsersAction) -> None:
    sandboxes = sub.add_parser("sandboxes", aliases=["sandbox", "sb"], help="throw-away Docker sandboxes")
    actions = sandboxes.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a sandbox: --image (shape A) or --spec (shape B)")
    create.add_argument("--image", help="fully-qualified base image (shape A), e.g. localhost/svc/python:3.11")
    create.add_argument("--service", action="append", dest="services", metavar="TYPE",
                        help="shape A backing service: postgres, redis or http_mock (repeatable)")
    create.add_argument("--spec", dest="spec_id", metavar="SPEC_ID",
                        help="boot the spec's whole sandbox (shape B): a stored spec id, or a spec file (uploaded first)")
    create.add_argument("--spec-version", type=int, help="spec version (default latest)")
    create.add_argument("--seed", help="reproduce a sandbox (default: a new seed)")
    create.add_argument("--timeout", help="sandbox life, e.g. 10m (default: spec resources.timeout, else 30m)")
    create.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE", help="metadata entry (repeatable)")
    create.add_argument("--secret", action="append", default=[], metavar="NAME[=VALUE]",
                        help="secret value; NAME alone reads it from your environment (repeatable)")
    create.add_argument("--no-local-secrets", action="store_true",
                        help="send only --secret values, do not resolve the spec's declared secrets here")
    create.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="environment variable (repeatable)")
    create.add_argument("--wait", action="store_true", help="shape A: wait until the sandbox is ready (or failed)")
    create.set_defaults(func=create_sandbox)

    ls = actions.add_parser("list", help="list sandboxes (default: active ones)")
    ls.add_argument("--status", help="provisioning, ready, running, stopped, failed, active or all")
    ls.add_argument("--spec-id")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=list_sandboxes)

    nodes = actions.add_parser("nodes", help="the nodes sandboxes run on (the local engine or each swarm node), "
                                             "what the live sandboxes reserve there and which of yours run where")
    nodes.set_defaults(func=lambda args, client: _emit_get(client, R.LIST_NODES))

    get = actions.add_parser("get", help="show one sandbox")
    get.add_argument("sandbox_id")
    get.set_defaults(func=get_sandbox)

    delete = actions.add_parser("delete", aliases=["rm"], help="stop a sandbox and release everything")
    delete.add_argument("sandbox_ids", nargs="+", metavar="SANDBOX_ID")
    delete.set_defaults(func=delete_sandbox)

    execute = actions.add_parser("exec", help="run a command; exits with its exit code (-- separates the command)")
    execute.add_argument("sandbox_id")
    execute.add_argument("command", nargs=argparse.REMAINDER, help="the command (one argument: run with sh -c)")
    execute.add_argument("--timeout", dest="cmd_timeout", help="command timeout, e.g. 30s (default 10m)")
    execute.add_argument("--background", action="store_true", help="start it and return at once")
    execute.add_argument("--json", action="store_true", help="print the whole result as JSON")
    execute.set_defaults(func=exec_command)

    events = actions.add_parser("events", help="follow the lifecycle stream (NDJSON) until the sandbox is destroyed")
    events.add_argument("sandbox_id")
    events.set_defaults(func=follow_events)

    state = actions.add_parser("state", help="workspace files with checksums")
    state.add_argument("sandbox_id")
    state.set_defaults(func=lambda args, client: _emit_get(client, R.SANDBOX_STATE, sandbox_id=args.sandbox_id))
    diff = actions.add_parser("diff", help="workspace changes since boot")
    diff.add_argument("sandbox_id")
    diff.set_defaults(func=lambda args, client: _emit_get(client, R.SANDBOX_DIFF, sandbox_id=args.sandbox_id))

    timeout = actions.add_parser("timeout", help="set the remaining life from now, e.g. 10m")
    timeout.add_argument("sandbox_id")
    timeout.add_argument("duration")
    timeout.set_defaults(func=set_timeout)

    files = actions.add_parser("files", help="workspace files: put, get, rm")
    file_actions = files.add_subparsers(dest="file_action", metavar="ACTION", required=True)
    put = file_actions.add_parser("put", help="write a file (from --from FILE, --content TEXT, or stdin)")
    put.add_argument("sandbox_id")
    put.add_argument("path", help="workspace path: foo.txt or /workspace/foo.txt")
    source = put.add_mutually_exclusive_group()
    source.add_argument("--from", dest="from_file", metavar="FILE")
    source.add_argument("--content")
    put.set_defaults(func=put_file)
    cat = file_actions.add_parser("get", aliases=["cat"], help="print a file (or write it with -o)")
    cat.add_argument("sandbox_id")
    cat.add_argument("path")
    cat.add_argument("-o", "--output", help="write to this file instead of stdout")
    cat.set_defaults(func=get_file)
    rm = file_actions.add_parser("rm", help="delete a file")
    rm.add_argument("sandbox_id")
    rm.add_argument("path")
    rm.set_defaults(func=rm_file)


def _pairs(items: list[str], what: str, env_fallback: bool = False) -> dict[str, str]:
    import os

    from client.console import CliError

    out: dict[str, str] = {}
    for item in items:
        if "=" in item:
            key, value = item.split("=", 1)
        elif env_fallback:
            key, value = item, os.environ.get(item)
            if value is None:
                raise CliError(f"{what} {item}: not set in your environment (use {item}=VALUE)")
        else:
            raise CliError(f"{what} '{item}': expected KEY=VALUE")
        out[key] = value
    return out


def _path(path: str) -> str:
    """A workspace path relative to /workspace (the route percent-encodes it)."""
    return path.lstrip("/") if not path.startswith("/workspace/") else path[len("/workspace/"):]


async def _emit_get(client: Client, route: Any, **path: Any) -> int:
    from client.console import emit

    emit(await client.call(route, **path))
    return 0


async def create_sandbox(args, client: Client) -> int:
    import asyncio

    from client.console import CliError, emit, say

    if bool(args.image) == bool(args.spec_id):
        raise CliError("give --image (shape A) or --spec (shape B)")
    body: dict[str, Any] = {"seed": args.seed, "timeout": args.timeout}
    if args.metadata:
        body["metadata"] = _pairs(args.metadata, "--metadata")
    explicit = _pairs(args.secret, "--secret", env_fallback=True) if args.secret else {}
    if args.env:
        body["env"] = _pairs(args.env, "--env")
    if args.image:
        body.update(image=args.image, services=args.services)
    else:
        from client.commands.runs import prepared_spec

        prepared = await prepared_spec(client, args.spec_id, args.spec_version, explicit, not args.no_local_secrets)
        body.update(spec_id=prepared["spec_id"], spec_version=prepared["spec_version"])
        explicit = prepared["secrets"]
    if explicit:
        body["secrets"] = explicit
    body = {k: v for k, v in body.items() if v is not None}
    sandbox = await client.call(R.CREATE_SANDBOX, body=body, timeout=BOOT_TIMEOUT_S)
    if args.wait and sandbox["state"] == "creating":
        while sandbox["state"] == "creating":
            await asyncio.sleep(0.2)
            sandbox = await client.call(R.GET_SANDBOX, sandbox_id=sandbox["id"])
    emit(sandbox)
    if sandbox["state"] == "error":
        error = sandbox.get("error") or {}
        say(f"svc: sandbox {sandbox['id']} failed at {error.get('step')}: {error.get('message')}")
        return 1
    say(f"sandbox {sandbox['id']} {sandbox['status']}")
    return 0


async def list_sandboxes(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.LIST_SANDBOXES, query={"status": args.status, "spec_id": args.spec_id, "limit": args.limit}))
    return 0


async def get_sandbox(args, client: Client) -> int:
    return await _emit_get(client, R.GET_SANDBOX, sandbox_id=args.sandbox_id)


async def delete_sandbox(args, client: Client) -> int:
    from client.console import say

    for sandbox_id in args.sandbox_ids:
        await client.call(R.DELETE_SANDBOX, sandbox_id=sandbox_id)
        say(f"deleted sandbox {sandbox_id}")
    return 0


async def exec_command(args, client: Client) -> int:
    from client.console import CliError, emit

    argv = [a for a in args.command]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise CliError("give a command: svc sandboxes exec SANDBOX_ID -- ls -la")
    command: str | list[str] = argv[0] if len(argv) == 1 else argv
    body: dict[str, Any] = {"command": command, "background": args.background}
    if args.cmd_timeout:
        body["timeout"] = args.cmd_timeout
    from daemon.spec import parse_duration

    wait = parse_duration(args.cmd_timeout) if args.cmd_timeout else 600.0
    result = await client.call(R.RUN_SANDBOX_COMMAND, body=body, timeout=wait + 60, sandbox_id=args.sandbox_id)
    if args.json or args.background:
        emit(result)
    else:
        sys.stdout.write(result["stdout"])
        sys.stdout.flush()
        sys.stderr.write(result["stderr"])
        sys.stderr.flush()
    code = result.get("exit_code")
    return 0 if code is None else (code if 0 <= code < 256 else 1)


async def follow_events(args, client: Client) -> int:
    async for event in client.stream(R.SANDBOX_EVENTS, sandbox_id=args.sandbox_id):
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    return 0


async def set_timeout(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.SET_SANDBOX_TIMEOUT, body={"timeout": args.duration}, sandbox_id=args.sandbox_id))
    return 0


async def put_file(args, client: Client) -> int:
    from client.console import CliError, emit

    if args.from_file:
        try:
            data = Path(args.from_file).read_bytes()
        except OSError as exc:
            raise CliError(f"{args.from_file}: {exc.strerror}")
    elif args.content is not None:
        data = args.content.encode()
    else:
        data = sys.stdin.buffer.read()
    try:
        body = {"path": args.path, "content": data.decode("utf-8"), "encoding": "utf-8"}
    except UnicodeDecodeError:
        body = {"path": args.path, "content": base64.b64encode(data).decode(), "encoding": "base64"}
    emit(await client.call(R.WRITE_SANDBOX_FILE, body=body, sandbox_id=args.sandbox_id))
    return 0


async def get_file(args, client: Client) -> int:
    data = await client.call(R.READ_SANDBOX_FILE, raw=True, sandbox_id=args.sandbox_id, path=_path(args.path))
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


async def rm_file(args, client: Client) -> int:
    from client.console import say

    await client.call(R.DELETE_SANDBOX_FILE, sandbox_id=args.sandbox_id, path=_path(args.path))
    say(f"deleted {args.path}")
    return 0
