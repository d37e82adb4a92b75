"""The sandbox workspace on the host: a directory bind-mounted at `/workspace`.

The daemon reads and writes it directly. Every path a client sends is resolved by `normalize`
(`/workspace/foo.txt` and `foo.txt` are the same file; any `..` segment is refused), then opened
one component at a time relative to the workspace root with `O_NOFOLLOW` (`open_under`), so a
symbolic link the agent planted can never lead the daemon outside the workspace. Files are opened
only when they are regular files (checked on an `O_PATH` descriptor before the real open), so a
FIFO cannot hang the daemon and a device node is never opened. Walks of the whole tree (`walk`:
manifest, size, snapshot) go from directory fd to directory fd the same way. Everything the daemon
does under /workspace goes through these helpers (files API, task file, audit copy, file checks,
snapshot export, file watch).

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
from pathlib import Path
from typing import Any, Iterator

ROOT = "/workspace"
RESERVED = ".svc"
MAX_DEPTH = 256  # directory levels `walk` descends; deeper trees are refused, never half-listed
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_PATH = getattr(os, "O_PATH", 0)


class PathError(ValueError):
    """The path is not acceptable (400)."""


class SymlinkError(PathError):
    """A component of the path is a symbolic link: the daemon does not follow it."""


class NotRegularFile(PathError):
    """The path names a directory, FIFO, socket or device, not a regular file."""


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
    """An fd for the directory `root/parts...`, walked without following symlinks (`root` itself is
    the daemon's own path). `create`: missing directories are made (0755)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for part in parts:
            if part in ("", ".", ".."):
                raise PathError(f"bad path component {part!r}")
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise FileMissing(part)
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile (or a link planted meanwhile: the open below refuses it)
                try:
                    next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise SymlinkError(f"'{part}' on the way to the file is a symbolic link or not a directory")
                    raise
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SymlinkError(f"'{part}' on the way to the file is a symbolic link or not a directory")
                raise
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_dir(root: str, rel: str = "", create: bool = False) -> int:
    """An fd (O_RDONLY | O_DIRECTORY) for the workspace directory `rel` ("" = the root), every
    component opened with O_NOFOLLOW. The caller closes it."""
    return _open_dir_chain(root, [p for p in rel.split("/") if p] if rel else [], create)


def _describe_mode(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    return "not a regular file"


def _not_regular(rel: str, mode: int) -> PathError:
    what = _describe_mode(mode)
    if stat.S_ISLNK(mode):
        return SymlinkError(f"'{rel}' is a symbolic link; the daemon does not follow links in the workspace")
    return NotRegularFile(f"'{rel}' is {what}, not a regular file")


def open_leaf(dir_fd: int, name: str, flags: int = os.O_RDONLY, mode: int = 0o644, rel: str | None = None) -> int:
    """Open the regular file `name` in the directory `dir_fd` without following a link and without
    ever opening anything but a regular file (no FIFO, device or socket). With O_CREAT in `flags`
    a missing file is created (O_EXCL, so never through a link planted meanwhile)."""
    rel = rel or name
    if "/" in name or name in ("", ".", ".."):
        raise PathError(f"bad file name {name!r}")
    for _attempt in range(3):
        if _PATH:
            try:
                probe = os.open(name, _PATH | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                probe = None
            if probe is not None:
                try:
                    st = os.fstat(probe)
                    if not stat.S_ISREG(st.st_mode):
                        raise _not_regular(rel, st.st_mode)
                    # reopen the very inode the O_PATH descriptor holds (no second lookup by name)
                    return os.open(f"/proc/self/fd/{probe}", (flags & ~(os.O_CREAT | os.O_EXCL)) | _CLOEXEC)
                finally:
                    os.close(probe)
        else:  # no O_PATH: probe with lstat, then open with O_NONBLOCK and check again
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None:
                if not stat.S_ISREG(st.st_mode):
                    raise _not_regular(rel, st.st_mode)
                try:
                    fd = os.open(name, (flags & ~(os.O_CREAT | os.O_EXCL)) | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC,
                                 dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        raise _not_regular(rel, stat.S_IFLNK)
                    raise
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    os.close(fd)
                    raise _not_regular(rel, st.st_mode)
                return fd
        if not flags & os.O_CREAT:
            raise FileMissing(rel)
        try:
            return os.open(name, flags | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue  # created meanwhile: look again
    raise PathError(f"'{rel}' keeps changing; giving up")


def open_under(root: str, rel: str, flags: int = os.O_RDONLY, mode: int = 0o644, create_dirs: bool = False) -> int:
    """An fd for the regular file `root/rel` (`rel` already normalized), every directory on the way
    opened relative to its parent with O_NOFOLLOW | O_DIRECTORY and the file itself through
    `open_leaf`. Raises SymlinkError, NotRegularFile, FileMissing. The caller closes the fd."""
    parts = rel.split("/")
    dir_fd = _open_dir_chain(root, parts[:-1], create=create_dirs)
    try:
        return open_leaf(dir_fd, parts[-1], flags, mode, rel)
    finally:
        os.close(dir_fd)


def write_file(root: str, rel: str, data: bytes, mode: int = 0o644) -> dict[str, Any]:
    try:
        fd = open_under(root, rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, create_dirs=True)
    except SymlinkError:
        raise SymlinkError(f"'{rel}' is (or goes through) a symbolic link; refusing to write through it")
    except NotRegularFile as exc:
        raise NotRegularFile(str(exc).replace(", not a regular file", ""))
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return {"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def replace_file(root: str, rel: str, data: bytes, mode: int = 0o644) -> None:
    """Write `root/rel` atomically: a new file next to it, renamed over it. A symbolic link (or
    anything else) the agent put at `rel` is replaced, never followed; a link on the way refuses."""
    parts = rel.split("/")
    dir_fd = _open_dir_chain(root, parts[:-1], create=True)
    try:
        tmp = f".{parts[-1]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, mode, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), mode)
            os.rename(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
    finally:
        os.close(dir_fd)


def read_file(root: str, rel: str, limit: int | None = None) -> bytes:
    fd = open_under(root, rel, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read() if limit is None else fh.read(limit)


def lstat(root: str, rel: str) -> os.stat_result | None:
    """`lstat` of `root/rel` (None when missing) with every directory on the way opened without
    following links (SymlinkError when one of them is a link)."""
    parts = rel.split("/")
    try:
        dir_fd = _open_dir_chain(root, parts[:-1], create=False)
    except FileMissing:
        return None
    try:
        return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    finally:
        os.close(dir_fd)


def is_dir(root: str, rel: str) -> bool:
    try:
        st = lstat(root, rel)
    except PathError:
        return False
    return st is not None and stat.S_ISDIR(st.st_mode)


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


def walk(root: str, sub: str = "", skip_reserved: bool = True) -> Iterator[tuple[str, os.stat_result, int, str]]:
    """Every entry under `root/sub`, depth first, as `(rel, lstat, dir_fd, name)`: `dir_fd` is its
    parent directory, open only while the tuple is being handled. Links are reported, never
    followed; every directory is opened from its parent with O_NOFOLLOW, so swapping a directory for
    a link mid-walk cannot lead outside the workspace. `.svc` at the root is left out with
    `skip_reserved`. More than MAX_DEPTH nested directories raise PathError (never a partial list)."""
    try:
        top = open_dir(root, sub)
    except (FileMissing, FileNotFoundError, NotADirectoryError, PathError):
        return
    base = f"{sub.strip('/')}/" if sub.strip("/") else ""
    stack: list[tuple[int, str, Iterator[str]]] = []
    try:
        stack.append((top, base, iter(sorted(os.listdir(top)))))
    except OSError:
        os.close(top)
        return
    try:
        while stack:
            fd, prefix, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                os.close(fd)
                continue
            if not prefix and skip_reserved and name == RESERVED:
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            rel = prefix + name
            yield rel, st, fd, name
            if not stat.S_ISDIR(st.st_mode):
                continue
            if len(stack) >= MAX_DEPTH:
                raise PathError(f"the workspace nests directories more than {MAX_DEPTH} levels deep (at '{rel}')")
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link
            try:
                children = sorted(os.listdir(child))
            except OSError:
                os.close(child)
                continue
            stack.append((child, rel + "/", iter(children)))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


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


def _hash_fd(fd: int) -> str:
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb", buffering=0) as fh:
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
    for rel, st, dir_fd, name in walk(root):
        mode = f"{stat.S_IMODE(st.st_mode):04o}"
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError:
                continue
            entries.append(Entry(rel, 0, hashlib.sha256(("symlink:" + target).encode()).hexdigest(), mode, "symlink").as_dict())
        elif stat.S_ISREG(st.st_mode):
            try:
                fd = open_leaf(dir_fd, name, os.O_RDONLY, rel=rel)
            except (OSError, PathError):
                continue  # gone or swapped meanwhile
            try:
                digest = _hash_fd(fd)
            except OSError:
                continue
            entries.append(Entry(rel, st.st_size, digest, mode).as_dict())
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
    """Bytes in regular files under `root` (apparent size, like `du --apparent-size`), `.svc`
    included; stops counting early once above `stop_above`."""
    total = 0
    try:
        for _rel, st, _fd, _name in walk(root, skip_reserved=False):
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                if stop_above is not None and total > stop_above:
                    return total
    except PathError:
        pass  # nested too deep to walk: count what was seen
    return total


def tar_tree(root: str, target: Path) -> None:
    """The tree under `root` as a gzipped tar at `target`, members under `workspace/`: directories,
    links (as links) and regular files, each opened without following a link; what vanishes or is
    swapped for something else meanwhile is left out."""
    import tarfile

    def info(name: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(name)
        entry.type = kind
        entry.mode = stat.S_IMODE(st.st_mode)
        entry.mtime = int(st.st_mtime)
        entry.uid, entry.gid = st.st_uid, st.st_gid
        return entry

    with tarfile.open(target, "w:gz", compresslevel=6) as tar:
        tar.addfile(info("workspace", os.stat(root), tarfile.DIRTYPE))
        for rel, st, dir_fd, name in walk(root):
            arcname = f"workspace/{rel}"
            if stat.S_ISDIR(st.st_mode):
                tar.addfile(info(arcname, st, tarfile.DIRTYPE))
            elif stat.S_ISLNK(st.st_mode):
                try:
                    link = info(arcname, st, tarfile.SYMTYPE)
                    link.linkname = os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    continue
                tar.addfile(link)
            elif stat.S_ISREG(st.st_mode):
                try:
                    fd = open_leaf(dir_fd, name, os.O_RDONLY, rel=rel)
                except (OSError, PathError):
                    continue
                with os.fdopen(fd, "rb") as fh:
                    current = os.fstat(fh.fileno())
                    entry = info(arcname, current, tarfile.REGTYPE)
                    entry.size = current.st_size
                    tar.addfile(entry, fh)


def write_fixture(entries: list[tuple[str, bytes, int]], name: str | None, root: str, to: str) -> None:
    """Write an uploaded fixture into the workspace at `to`: one file (`name` set: into the
    directory `to`, or as the file `to`), or a directory's files (`name` None) below `to`."""
    base = "" if to.rstrip("/") in ("/workspace", "") else normalize(to)
    if name is None:
        for rel, data, mode in entries:
            write_file(root, f"{base}/{rel}" if base else rel, data, mode)
        return
    _, data, mode = entries[0]
    target_is_dir = not base or to.endswith("/") or is_dir(root, base)
    rel = (f"{base}/{name}" if base else name) if target_is_dir else base
    write_file(root, rel, data, mode)

