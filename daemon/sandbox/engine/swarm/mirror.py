"""Host directories that a local sandbox would bind-mount, kept in step with a container on another
node through the engine's archive API.

The host copy stays what the daemon reads (files, state, diff, scoring): it is pushed into the
container when it changed on the host, and the container's tree is pulled back over it after each
command. What comes back from a container is untrusted: it is unpacked with tarfile's `data`
filter (no absolute paths, no `..`, no links out, no devices, no owners) and bounded in size.
"""
from __future__ import annotations

import io
import os
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
KEEP = {"lost+found"}  # the workspace's own filesystem (diskquota.py): never copied, never removed
# Written by the daemon while commands run (the audit copy): pushed to the container, never pulled back over.
HOST_OWNED = KEEP | {".svc"}


class MirrorError(Exception):
    """A tree could not be copied (the message names the path and the limit or cause)."""


@dataclass
class Mirror:
    host: Path
    target: str  # absolute path in the container
    writable: bool
    signature: tuple = field(default=())
    # A helper's output directory (proxy audit lines, http_mock requests), possibly shared by several
    # containers: pulled by `collect_from` (files that grew), never pushed again after the start.
    collect: bool = False


def signature(host: Path) -> tuple:
    """What changes when anything under `host` changes (paths, sizes, modification times, modes)."""
    if host.is_file():
        st = host.stat()
        return (("", st.st_size, st.st_mtime_ns, st.st_mode),)
    out = []
    for root, dirs, files in os.walk(host):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            out.append((os.path.relpath(path, host), st.st_size, st.st_mtime_ns, st.st_mode))
    return tuple(out)


def pack(host: Path, target: str) -> bytes:
    """`host` (a directory or a file) as a tar stream to unpack at `/`, landing at `target`."""
    return pack_all([(host, target)])


def pack_all(trees: list[tuple[Path, str]], last_file: str | None = None) -> bytes:
    """Each (host, target) of `trees` as one tar stream to unpack at `/`, then, when given, the empty
    file `last_file`: it lands after everything else (a container waiting for it finds the rest there)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for host, target in trees:
            tar.add(str(host), arcname=target.strip("/"), recursive=True, filter=_without_kept(target))
            if buf.tell() > MAX_ARCHIVE_BYTES:
                raise MirrorError(f"{target}: over the limit of {MAX_ARCHIVE_BYTES} bytes to copy into the container")
        if last_file is not None:
            tar.addfile(tarfile.TarInfo(last_file), io.BytesIO(b""))
    return buf.getvalue()


def _without_kept(target: str) -> Callable[[tarfile.TarInfo], tarfile.TarInfo | None]:
    """A tar filter leaving out the workspace filesystem's own entries (KEEP) at the top of `target`."""
    top = target.strip("/") + "/"

    def keep(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if member.name.startswith(top) and member.name[len(top):].split("/")[0] in KEEP else member

    return keep


def replace_from(data: bytes, host: Path) -> None:
    """Make `host` hold exactly the tree in `data` (a container's `get_archive` of the mirrored path,
    whose members start with that path's last component). Only what differs is written or removed,
    so the host's file watcher (fswatch.py) sees the command's changes, not a rewrite of everything."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise MirrorError(f"{host.name}: over the limit of {MAX_ARCHIVE_BYTES} bytes to copy back")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        wanted: dict[str, tarfile.TarInfo] = {}
        for member in tar.getmembers():
            rest = member.name.partition("/")[2].rstrip("/")
            if not rest or rest.split("/")[0] in HOST_OWNED:
                continue  # the mirrored directory itself, or what the daemon owns
            member.name = rest
            if member.islnk():  # hard links name their target with the same leading component
                member.linkname = member.linkname.partition("/")[2]
            wanted[rest] = member
        _remove_missing(host, wanted)
        changed = [m for name, m in wanted.items() if not _same(host / name, m, tar)]
        try:
            tar.extractall(host, members=changed, filter=_data_or_skip)
        except (tarfile.TarError, OSError) as exc:
            raise MirrorError(f"{host.name}: cannot copy the container's tree back: {exc}") from exc


def collect_from(data: bytes, host: Path) -> int:
    """Take the append-only files of a container's output directory (its `get_archive` of the
    mirrored path: a helper's, or the agent's trace drop) that grew in the container into `host`, each
    replaced atomically so a reader polling by offset never sees a half-written file; one that cannot
    land (the container turned a file into a directory) is skipped. Removes nothing: other containers (the egress
    and db proxies share one audit directory) write other files there. Returns the files taken."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise MirrorError(f"{host.name}: over the limit of {MAX_ARCHIVE_BYTES} bytes to copy back")
    taken = 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            rest = member.name.partition("/")[2]
            parts = rest.split("/")
            if not member.isfile() or not rest or rest.startswith("/") or ".." in parts or parts[0] in HOST_OWNED:
                continue
            target = host / rest
            size = target.stat().st_size if target.is_file() and not target.is_symlink() else -1
            if member.size <= size:
                continue  # unchanged (or the host already has more: append-only)
            handle = tar.extractfile(member)
            if handle is None:
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.svc-tmp")
                tmp.write_bytes(handle.read())
                os.replace(tmp, target)
            except OSError:  # the container changed a file into a directory or back: its doing, skipped
                continue
            taken += 1
    return taken


def _remove_missing(host: Path, wanted: dict[str, tarfile.TarInfo]) -> None:
    """Remove host paths the container no longer has (or has as another kind of file)."""
    for root, dirs, files in os.walk(host, topdown=False):
        rel_root = os.path.relpath(root, host)
        if rel_root != "." and rel_root.split(os.sep)[0] in HOST_OWNED:
            continue
        for name in files + dirs:
            rel = name if rel_root == "." else os.path.join(rel_root, name)
            if rel.split(os.sep)[0] in HOST_OWNED:
                continue
            path = os.path.join(root, name)
            member = wanted.get(rel)
            is_dir = os.path.isdir(path) and not os.path.islink(path)
            if member is not None and member.isdir() == is_dir and member.issym() == os.path.islink(path):
                continue
            if is_dir:
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _same(path: Path, member: tarfile.TarInfo, tar: tarfile.TarFile) -> bool:
    """Whether the host already has this member (a regular file with the same bytes, a directory)."""
    if member.isdir():
        return path.is_dir() and not path.is_symlink()
    if not member.isfile() or path.is_symlink() or not path.is_file():
        return False
    if path.stat().st_size != member.size:
        return False
    handle = tar.extractfile(member)
    return handle is not None and handle.read() == path.read_bytes()


def _data_or_skip(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's `data` filter, except that what it refuses (a link out of the tree, a device) is
    left out of the host copy instead of failing the command that made it."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None
