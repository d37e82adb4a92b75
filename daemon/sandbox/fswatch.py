"""`audit.file_system`: `file_write` audit events for the sandbox workspace.

The workspace is a host directory bind-mounted at `/workspace`, so the daemon watches it directly
with Linux inotify (through ctypes, on the event loop: `loop.add_reader`). inotify reports events
on the inode whoever touches it, so the agent's reads and writes inside the container are seen
(watchfiles cannot report reads, hence inotify itself). The whole workspace is watched
recursively, new directories included; `/workspace/.svc` (the daemon's own audit file) never is.
Directories are opened from the workspace root without following links and watched through
`/proc/self/fd/N`, so a link the agent swaps in never puts a watch on a host directory.
Events are kept when their path is under one of the spec's `watch` directories (container paths;
relative ones are taken under /workspace) and their kind is in `track`:

    writes   a file closed after writing (IN_CLOSE_WRITE): operation `create` (it was created or
             moved in since the last event on it) or `modify`; a file moved in: `create`
    deletes  a file removed or moved away: operation `delete` (size null)
    reads    a file closed after reading only (IN_CLOSE_NOWRITE): operation `read`

Details: `{path: "/workspace/...", operation, size}` (`is_dir: true` for a deleted directory).
A write is reported when the file is closed, so a file held open and written for a long time shows
up once, at close. A directory is watched from the moment the daemon sees it created (its files
already there are then reported as created): a file made and removed inside a brand-new directory
before that moment is not reported. Directories outside /workspace cannot be watched from the host: such a `watch`
entry gets one `warning` event. The daemon's own reads of the workspace (state, diff, file checks)
are indistinguishable from the agent's and show up as reads too when `reads` is tracked.
"""
from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import stat
import struct
from pathlib import Path
from typing import Any, Callable, Iterable

log = logging.getLogger("svcd.sandbox.fswatch")

IN_ACCESS = 0x1
IN_MODIFY = 0x2
IN_CLOSE_WRITE = 0x8
IN_CLOSE_NOWRITE = 0x10
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

ROOT = "/workspace"
RESERVED = ".svc"
_EVENT = struct.Struct("iIII")

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.inotify_init1.argtypes = [ctypes.c_int]
        _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        _libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return _libc


def watch_prefixes(watch: Iterable[str]) -> tuple[list[str], list[str]]:
    """(workspace-relative prefixes, entries outside /workspace). "" is the whole workspace."""
    inside, outside = [], []
    for entry in watch:
        path = entry.strip()
        if not path.startswith("/"):
            path = f"{ROOT}/{path}"
        norm = os.path.normpath(path)
        if norm == ROOT:
            inside.append("")
        elif norm.startswith(ROOT + "/"):
            inside.append(norm[len(ROOT) + 1:])
        else:
            outside.append(entry)
    return inside, outside


def wanted(rel: str, prefixes: list[str]) -> bool:
    return any(p == "" or rel == p or rel.startswith(p + "/") for p in prefixes)


MAX_WATCHES_PER_SANDBOX = 8192


def max_watches_per_sandbox() -> int:
    try:
        return max(1, int(os.environ.get("SERVICE_FS_WATCHES_PER_SANDBOX") or MAX_WATCHES_PER_SANDBOX))
    except ValueError:
        return MAX_WATCHES_PER_SANDBOX


class WorkspaceWatcher:
    """Watches the host directory `root` (the sandbox's /workspace); calls `emit(details)` for each
    kept event. `start()` and `stop()` run on the event loop."""

    def __init__(self, root: Path, watch: Iterable[str], track: Iterable[str], emit: Callable[[dict[str, Any]], None],
                 warn: Callable[[dict[str, Any]], None] | None = None,
                 incomplete: Callable[[str], None] | None = None, max_watches: int | None = None):
        self.root = str(root)
        self.prefixes, self.outside = watch_prefixes(watch)
        self.track = set(track)
        self.emit = emit
        self.warn = warn or (lambda details: None)
        self.fd: int | None = None
        self.dirs: dict[int, str] = {}  # watch descriptor -> workspace-relative directory ("" = root)
        self.created: set[str] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.count = 0
        self._warned_limit = False
        # inotify watches are one pool for every process of the host's user (the daemon's): one
        # sandbox may hold at most this many, so its 100k directories cannot stop other sandboxes'
        # audits. A directory left unwatched makes this audit incomplete (`incomplete`).
        self.max_watches = max_watches or max_watches_per_sandbox()
        self.incomplete = incomplete or (lambda reason: None)

    @property
    def mask(self) -> int:
        mask = IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
        if "writes" in self.track:
            mask |= IN_CLOSE_WRITE
        if "deletes" in self.track:
            mask |= IN_DELETE | IN_MOVED_FROM
        if "reads" in self.track:
            mask |= IN_CLOSE_NOWRITE
        return mask

    def start(self) -> None:
        for entry in self.outside:
            self.warn({"kind": "file_system_watch", "path": entry,
                       "message": f"file_system.watch '{entry}' is outside /workspace: only the workspace can be watched"})
        if not self.prefixes:
            return
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            self.warn({"kind": "file_system_watch", "message": f"inotify unavailable: {os.strerror(err)}"})
            return
        self.fd = fd
        self._add_tree("")
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(fd, self._readable)

    def stop(self) -> None:
        if self.fd is None:
            return
        try:
            self._readable()  # whatever is queued
        except Exception:
            pass
        if self.loop is not None:
            try:
                self.loop.remove_reader(self.fd)
            except Exception:
                pass
        os.close(self.fd)
        self.fd = None
        self.dirs.clear()

    def drain(self) -> None:
        """Process the events queued so far (tests and teardown)."""
        if self.fd is not None:
            self._readable()

    # --- watches ---------------------------------------------------------------------------

    def _abs(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _add_dir(self, rel: str, dir_fd: int | None = None) -> bool:
        """Watch the workspace directory `rel`. The directory is opened from the workspace root one
        component at a time without following links (or given as `dir_fd`) and watched through
        /proc/self/fd, so a link the agent swaps in never puts a watch on a host directory."""
        if rel == RESERVED or rel.startswith(RESERVED + "/"):
            return False
        from daemon.sandbox import workspace as ws

        if len(self.dirs) >= self.max_watches:
            self._limit_reached(rel, f"this sandbox's {self.max_watches} inotify watches are all used "
                                     "(SERVICE_FS_WATCHES_PER_SANDBOX)")
            return False
        own = dir_fd is None
        if own:
            try:
                dir_fd = ws.open_dir(self.root, rel)
            except (OSError, ws.PathError):
                return False
        try:
            wd = _lib().inotify_add_watch(self.fd, os.fsencode(f"/proc/self/fd/{dir_fd}"), self.mask & ~IN_DONT_FOLLOW)
        finally:
            if own and dir_fd is not None:
                os.close(dir_fd)
        if wd < 0:
            err = ctypes.get_errno()
            if err == errno.ENOSPC:
                self._limit_reached(rel, "the host's inotify watch limit is reached (fs.inotify.max_user_watches)")
            return False
        self.dirs[wd] = rel
        return True

    def _limit_reached(self, rel: str, why: str) -> None:
        if self._warned_limit:
            return
        self._warned_limit = True
        message = f"{why}: {ROOT}/{rel} and directories made after it are not watched, so the file audit is incomplete"
        self.warn({"kind": "file_system_watch", "path": f"{ROOT}/{rel}".rstrip("/"), "message": message})
        self.incomplete(message)

    def _add_tree(self, rel: str, report: bool = False) -> None:
        """Watch `rel` and every directory below it. With `report`, files already inside (created
        before the watch existed) are reported as created."""
        from daemon.sandbox import workspace as ws

        if not self._add_dir(rel):
            return
        try:
            for child, st, parent_fd, name in ws.walk(self.root, rel):
                if stat.S_ISDIR(st.st_mode):
                    try:
                        child_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
                    except OSError:
                        continue
                    try:
                        self._add_dir(child, child_fd)
                    finally:
                        os.close(child_fd)
                elif report and "writes" in self.track:
                    self._report(child, "create", st=st)
        except ws.PathError:
            pass  # nested deeper than the walk goes: those directories stay unwatched

    # --- events ----------------------------------------------------------------------------

    def _readable(self) -> None:
        while self.fd is not None:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("inotify read failed: %s", exc)
                return
            if not data:
                return
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size: offset + _EVENT.size + length]
                offset += _EVENT.size + length
                name = os.fsdecode(raw.rstrip(b"\0"))
                try:
                    self._event(wd, mask, name)
                except Exception:
                    log.exception("file watch event failed")

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.warn({"kind": "file_system_watch", "message": "too many file events at once: some were lost"})
            return
        if mask & IN_IGNORED:
            self.dirs.pop(wd, None)
            return
        parent = self.dirs.get(wd)
        if parent is None or not name:
            return
        rel = f"{parent}/{name}" if parent else name
        if rel == RESERVED or rel.startswith(RESERVED + "/"):
            return
        if mask & IN_ISDIR:
            if mask & (IN_CREATE | IN_MOVED_TO):
                self._add_tree(rel, report=True)
            elif mask & (IN_DELETE | IN_MOVED_FROM) and "deletes" in self.track:
                self._report(rel, "delete", is_dir=True)
            return
        if mask & (IN_CREATE | IN_MOVED_TO):
            self.created.add(rel)
            if mask & IN_MOVED_TO and "writes" in self.track:
                self._report(rel, "create")
                self.created.discard(rel)
            return
        if mask & IN_CLOSE_WRITE:
            op = "create" if rel in self.created else "modify"
            self.created.discard(rel)
            self._report(rel, op)
        elif mask & (IN_DELETE | IN_MOVED_FROM):
            self.created.discard(rel)
            self._report(rel, "delete")
        elif mask & IN_CLOSE_NOWRITE:
            self._report(rel, "read")

    def _report(self, rel: str, operation: str, is_dir: bool = False, st: os.stat_result | None = None) -> None:
        if not wanted(rel, self.prefixes):
            return
        size = None
        if operation not in ("delete",):
            if st is None:
                from daemon.sandbox import workspace as ws

                try:
                    st = ws.lstat(self.root, rel)  # no link followed on the way
                except (OSError, ws.PathError):
                    st = None
            size = st.st_size if st is not None else None
        details: dict[str, Any] = {"path": f"{ROOT}/{rel}", "operation": operation, "size": size}
        if is_dir:
            details["is_dir"] = True
        self.count += 1
        self.emit(details)
