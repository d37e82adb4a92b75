"""The sandbox workspace on the host: a directory bind-mounted at `/workspace`.

The daemon reads and writes it directly. Every path a client sends is resolved by `normalize`
(`/workspace/foo.txt` and `foo.txt` are the same file; any `..` segment is refused), then opened
one component at a time relative to the workspace root with `O_NOFOLLOW`, so a symbolic link the
agent planted can never lead the daemon outside the workspace.

`.svc/` at the workspace root is the daemon's own area (audit log, task file): it is left out of
`manifest` (state and diff), and clients may read it but not write or delete in it.

Everything here is synchronous and may touch many files: call it through `asyncio.to_thread`.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any

ROOT = "/workspace"
RESERVED = ".svc"


class PathError(ValueError):
    """The path is not acceptable (400)."""


class FileMissing(FileNotFoundError):
    """The path names nothing (404)."""


def normalize(user_path: str) -> str:
    """The workspace-relative form of `user_path` ("a/b.txt"); PathError when it leaves the
    workspace, contains `..` or names the workspace root itself."""
    if not isinstance(user_path, str) or not user_path.strip():
        raise PathError("path must not be empty")
    if "\x00" in user_path:
        raise PathError("path must not contain NUL bytes")
    path = user_path.replace("\\", "/")
    if path.startswith("/"):
        if path == ROOT or path == ROOT + "/":
            raise PathError(f"path '{user_path}' names the workspace root, not a file")
        if not path.startswith(ROOT + "/"):
            raise PathError(f"path '{user_path}' is outside /workspace; use a path relative to the workspace or under /workspace/")
        path = path[len(ROOT) + 1:]
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise PathError(f"path '{user_path}' contains '..'; paths must stay inside /workspace")
        parts.append(part)
    if not parts:
        raise PathError(f"path '{user_path}' names the workspace root, not a file")
    return "/".join(parts)


def is_reserved(rel: str) -> bool:
    return rel == RESERVED or rel.startswith(RESERVED + "/")


def _open_dir_chain(root: str, parts: list[str], create: bool) -> int:
    """An fd for the directory `root/parts...`, walked without following symlinks."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise FileMissing(part)
                os.mkdir(part, 0o755, dir_fd=fd)
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathError(f"'{part}' on the way to the file is a symbolic link or not a directory")
                raise
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_file(root: str, rel: str, data: bytes, mode: int = 0o644) -> dict[str, Any]:
    parts = rel.split("/")
    dir_fd = _open_dir_chain(root, parts[:-1], create=True)
    try:
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathError(f"'{rel}' is a symbolic link; refusing to write through it")
            if exc.errno == errno.EISDIR:
                raise PathError(f"'{rel}' is a directory")
            raise
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    finally:
        os.close(dir_fd)
    return {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def read_file(root: str, rel: str, limit: int | None = None) -> bytes:
    parts = rel.split("/")
    dir_fd = _open_dir_chain(root, parts[:-1], create=False)
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        except FileNotFoundError:
            raise FileMissing(rel)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathError(f"'{rel}' is a symbolic link; refusing to follow it")
            raise
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise PathError(f"'{rel}' is not a regular file")
            return fh.read() if limit is None else fh.read(limit)
    finally:
        os.close(dir_fd)


def delete_file(root: str, rel: str) -> None:
    parts = rel.split("/")
    dir_fd = _open_dir_chain(root, parts[:-1], create=False)
    try:
        try:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise FileMissing(rel)
        if stat.S_ISDIR(st.st_mode):
            raise PathError(f"'{rel}' is a directory; delete the files in it")
        os.unlink(parts[-1], dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


@dataclass
class Entry:
    path: str
    size: int
    sha256: str
    mode: str
    type: str = "file"

    def as_dict(self) -> dict[str, Any]:
        body = {"path": self.path, "size": self.size, "sha256": self.sha256, "mode": self.mode}
        if self.type != "file":
            body["type"] = self.type
        return body


def _hash_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        while True:
            chunk = fh.read(1024 * 1024)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def manifest(root: str) -> list[dict[str, Any]]:
    """Every regular file and symlink under `root` (not `.svc/`), sorted by path. Symlinks are
    listed with the hash of their target text, never followed."""
    entries: list[dict[str, Any]] = []
    if not os.path.isdir(root):
        return entries

    def walk(directory: str, prefix: str) -> None:
        try:
            items = list(os.scandir(directory))
        except (PermissionError, FileNotFoundError):
            return
        for item in items:
            rel = prefix + item.name
            if not prefix and item.name == RESERVED:
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            mode = f"{stat.S_IMODE(st.st_mode):04o}"
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(item.path)
                except OSError:
                    continue
                entries.append(Entry(rel, 0, hashlib.sha256(("symlink:" + target).encode()).hexdigest(), mode, "symlink").as_dict())
            elif stat.S_ISDIR(st.st_mode):
                walk(item.path, rel + "/")
            elif stat.S_ISREG(st.st_mode):
                try:
                    digest = _hash_file(item.path)
                except (PermissionError, FileNotFoundError):
                    continue
                entries.append(Entry(rel, st.st_size, digest, mode).as_dict())

    walk(root, "")
    entries.sort(key=lambda e: e["path"])
    return entries


def diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    old = {e["path"]: e for e in before}
    new = {e["path"]: e for e in after}
    added = [new[p] for p in sorted(new) if p not in old]
    modified = []
    for path in sorted(new):
        if path in old and (old[path]["sha256"] != new[path]["sha256"] or old[path]["mode"] != new[path]["mode"]):
            modified.append({**new[path], "previous_sha256": old[path]["sha256"]})
    deleted = [{"path": p} for p in sorted(old) if p not in new]
    return {"added": added, "modified": modified, "deleted": deleted}


def disk_usage(root: str, stop_above: int | None = None) -> int:
    """Bytes in regular files under `root` (apparent size, like `du --apparent-size`); stops counting
    early once above `stop_above`."""
    total = 0
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            items = list(os.scandir(directory))
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
        for item in items:
            try:
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(item.path)
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
        if stop_above is not None and total > stop_above:
            return total
    return total
