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
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        top = target.strip("/") + "/"
        tar.add(str(host), arcname=target.strip("/"), recursive=True,
                filter=lambda m: None if m.name[len(top):].split("/")[0] in KEEP and m.name.startswith(top) else m)
        if buf.tell() > MAX_ARCHIVE_BYTES:
            raise MirrorError(f"{target}: over the limit of {MAX_ARCHIVE_BYTES} bytes to copy into the container")
    return buf.getvalue()


def replace_from(data: bytes, host: Path) -> None:
    """Make `host` hold exactly the tree in `data` (a container's `get_archive` of the mirrored path,
    whose members start with that path's last component)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise MirrorError(f"{host.name}: over the limit of {MAX_ARCHIVE_BYTES} bytes to copy back")
    for entry in os.scandir(host):
        if entry.name in HOST_OWNED:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = []
        for member in tar.getmembers():
            head, _, rest = member.name.partition("/")
            if not rest or rest.split("/")[0] in HOST_OWNED:
                continue  # the mirrored directory itself
            member.name = rest
            if member.islnk():  # hard links name their target with the same leading component
                member.linkname = member.linkname.partition("/")[2]
            members.append(member)
        try:
            tar.extractall(host, members=members, filter=_data_or_skip)
        except (tarfile.TarError, OSError) as exc:
            raise MirrorError(f"{host.name}: cannot copy the container's tree back: {exc}") from exc


def _data_or_skip(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's `data` filter, except that what it refuses (a link out of the tree, a device) is
    left out of the host copy instead of failing the command that made it."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None
