"""`svc agents upload|list|get|versions|delete`: agent snapshots."""
from __future__ import annotations

import argparse
import io
import json
import shlex
import sys
import tarfile
from pathlib import Path
from typing import Callable

import aiohttp

from client.agent_source import SKIP_DIRS  # one list: what packing leaves out and watch mode ignores
from client.api import Client
from client.routes import R


def register(sub: argparse._SubParsersAction) -> None:
    agents = sub.add_parser("agents", help="agent snapshots (versioned, content-addressed bundles)")
    actions = agents.add_subparsers(dest="action", metavar="ACTION", required=True)

    upload = actions.add_parser("upload", help="upload a bundle (.tar.gz, or a directory packed for you) as a new version")
    upload.add_argument("name")
    upload.add_argument("bundle", help="a .tar.gz rooted at the agent's working directory, or a directory")
    upload.add_argument("--entrypoint", required=True, help='the command, e.g. "python agent.py" (relative paths are inside the bundle)')
    upload.add_argument("--tag", help="a label to move to this version (latest is always set)")
    upload.add_argument("--runtime", help="a runtime hint, e.g. python3.11")
    upload.add_argument("--auth", help="JSON {required_env, config_files, egress} (or @file.json)")
    upload.set_defaults(func=upload_agent)

    ls = actions.add_parser("list", help="agents and their latest snapshot")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=list_agents)

    get = actions.add_parser("get", help="one snapshot: the latest, or by --version / --tag, or a snap_ id")
    get.add_argument("name", help="agent name or snapshot id (snap_...)")
    pick = get.add_mutually_exclusive_group()
    pick.add_argument("--version", type=int)
    pick.add_argument("--tag")
    get.set_defaults(func=get_agent)

    versions = actions.add_parser("versions", help="every version of an agent")
    versions.add_argument("name")
    versions.add_argument("--limit", type=int, default=100)
    versions.set_defaults(func=agent_versions)

    delete = actions.add_parser("delete", help="delete one snapshot version (frees its bundle when unused)")
    delete.add_argument("snapshot_id")
    delete.set_defaults(func=delete_snapshot)


def pack_directory(root: Path, leave_out: Callable[[Path], bool] | None = None) -> bytes:
    """A reproducible .tar.gz of `root`'s contents: sorted, mtime 0, owner 0, so the same files give
    the same digest. `leave_out(path)` true skips a file or a whole folder."""
    buf = io.BytesIO()
    import gzip

    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(_walk(root, leave_out)):
                rel = path.relative_to(root).as_posix()
                info = tar.gettarinfo(str(path), arcname=rel)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isfile():
                    with path.open("rb") as fh:
                        tar.addfile(info, fh)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def _walk(root: Path, leave_out: Callable[[Path], bool] | None = None):
    for path in root.iterdir():
        if path.name in SKIP_DIRS or (leave_out is not None and leave_out(path)):
            continue
        yield path
        if path.is_dir() and not path.is_symlink():
            yield from _walk(path, leave_out)


def read_bundle(path: str) -> bytes:
    from client.console import CliError

    target = Path(path)
    if target.is_dir():
        return pack_directory(target)
    try:
        return target.read_bytes()
    except OSError as exc:
        raise CliError(f"{path}: cannot read the bundle: {exc}")


async def upload_bundle(client: Client, metadata: dict, bundle: bytes) -> dict:
    """POST /v1/agents: `metadata` ({name, entrypoint, runtime?, tag?, auth?}) and the .tar.gz; the new snapshot."""
    form = aiohttp.FormData()
    form.add_field("metadata", json.dumps(metadata), content_type="application/json")
    form.add_field("bundle", bundle, filename="bundle.tar.gz", content_type="application/gzip")
    return await client.call(R.UPLOAD_AGENT, data=form, timeout=max(client.config.timeout, 300))


async def upload_agent(args, client: Client) -> int:
    from client.console import CliError, emit

    metadata: dict = {"name": args.name, "entrypoint": shlex.split(args.entrypoint)}
    if args.tag:
        metadata["tag"] = args.tag
    if args.runtime:
        metadata["runtime"] = args.runtime
    if args.auth:
        raw = Path(args.auth[1:]).read_text() if args.auth.startswith("@") else args.auth
        try:
            metadata["auth"] = json.loads(raw)
        except ValueError as exc:
            raise CliError(f"--auth is not valid JSON: {exc}")
    snapshot = await upload_bundle(client, metadata, read_bundle(args.bundle))
    print(f"uploaded {snapshot['name']} version {snapshot['version']} ({snapshot['id']}, {snapshot['size_bytes']} bytes)", file=sys.stderr)
    emit(snapshot)
    return 0


async def list_agents(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.LIST_AGENTS, query={"limit": args.limit}))
    return 0


async def get_agent(args, client: Client) -> int:
    from client.console import emit

    if args.name.startswith("snap_"):
        emit(await client.call(R.GET_SNAPSHOT, snapshot_id=args.name))
    elif args.version is not None:
        emit(await client.call(R.AGENT_BY_VERSION, name=args.name, version=args.version))
    elif args.tag:
        emit(await client.call(R.AGENT_BY_TAG, name=args.name, tag=args.tag))
    else:
        emit(await client.call(R.AGENT_LATEST, name=args.name))
    return 0


async def agent_versions(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.AGENT_VERSIONS, query={"limit": args.limit}, name=args.name))
    return 0


async def delete_snapshot(args, client: Client) -> int:
    await client.call(R.DELETE_SNAPSHOT, snapshot_id=args.snapshot_id)
    print(f"deleted snapshot {args.snapshot_id}", file=sys.stderr)
    return 0
