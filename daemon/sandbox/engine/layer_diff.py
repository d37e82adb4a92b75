"""A container's filesystem changes read from its overlay2 upper directory on this host, the same
answer as the engine's `GET /containers/{id}/changes` (`[{Path, Kind}]`, Kind 0 modified, 1 added,
2 deleted) in a few milliseconds instead of the engine's walk (about 180 ms per call here, paid
twice per run with file rules and once more for the grader's tamper check).

The upper directory holds what the agent wrote, so it is walked as hostile data: nothing is opened
or followed, only `lstat`ed. Whether a path existed before (modified rather than added) is looked up
in the image's lower directories one component at a time without following links; a link on the way
counts as "existed" (a modification: the conservative answer for the tamper check).
"""
from __future__ import annotations

import os
import stat
from typing import Any

MODIFIED, ADDED, DELETED = 0, 1, 2
OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")
MAX_ENTRIES = 200_000  # the agent decides how many files it writes: past this, the engine answers instead


class LayerUnreadable(Exception):
    """The upper directory cannot be walked here (another storage driver, a remote engine, too big)."""


def changes(upper: str, lowers: list[str]) -> list[dict[str, Any]]:
    if not os.path.isdir(upper) or not all(os.path.isdir(lower) for lower in lowers):
        raise LayerUnreadable(f"no overlay2 layers at {upper}")
    out: list[dict[str, Any]] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            names = os.listdir(os.path.join(upper, rel_dir) if rel_dir else upper)
        except OSError as exc:
            raise LayerUnreadable(str(exc)) from None
        for name in names:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            st = os.lstat(os.path.join(upper, rel))
            path = "/" + rel
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out.append({"Path": path, "Kind": DELETED})
                continue
            existed = _in_lowers(lowers, rel)
            out.append({"Path": path, "Kind": MODIFIED if existed else ADDED})
            if len(out) > MAX_ENTRIES:
                raise LayerUnreadable(f"over {MAX_ENTRIES} changed paths")
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)
                if existed and _opaque(os.path.join(upper, rel)):
                    # replaced whole: what the image had there is gone (as the engine reports it)
                    kept = set(os.listdir(os.path.join(upper, rel)))
                    out.extend({"Path": f"{path}/{n}", "Kind": DELETED} for n in sorted(_lower_names(lowers, rel) - kept))
    return out


def size(upper: str) -> int:
    """Bytes of the files in the upper directory, as the engine's SizeRw counts them (apparent sizes,
    directories not counted, a hard-linked file once); nothing followed."""
    if not os.path.isdir(upper):
        raise LayerUnreadable(f"no overlay2 layer at {upper}")
    total, entries, inodes = 0, 0, set()
    stack = [upper]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        raise LayerUnreadable(f"over {MAX_ENTRIES} paths")
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
                    elif st.st_size and st.st_ino not in inodes:
                        inodes.add(st.st_ino)
                        total += st.st_size
        except OSError as exc:
            raise LayerUnreadable(str(exc)) from None
    return total


def _lower_names(lowers: list[str], rel: str) -> set[str]:
    names: set[str] = set()
    for lower in lowers:
        current = lower
        for part in rel.split("/"):
            current = os.path.join(current, part)
            try:
                if not stat.S_ISDIR(os.lstat(current).st_mode):
                    break
            except OSError:
                break
        else:
            try:
                names.update(n for n in os.listdir(current)
                             if not (stat.S_ISCHR((st := os.lstat(os.path.join(current, n))).st_mode) and st.st_rdev == 0))
            except OSError:
                continue
            if _opaque(current):
                break
    return names


def _in_lowers(lowers: list[str], rel: str) -> bool:
    """Whether `rel` exists in the image below (the topmost lower layer that has it or hides it decides)."""
    parts = rel.split("/")
    for lower in lowers:
        current = lower
        for i, part in enumerate(parts):
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                break  # not in this layer: a deeper one may have it
            except OSError:
                return True
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                return False  # deleted by a layer above the rest
            if i == len(parts) - 1:
                return True
            if stat.S_ISLNK(st.st_mode):
                return True  # a link on the way: counted as existing (see the module docstring)
            if not stat.S_ISDIR(st.st_mode):
                break
            if _opaque(current):
                # the layers below are hidden under this directory
                return _exists_plain(current, parts[i + 1:])
    return False


def _exists_plain(base: str, rest: list[str]) -> bool:
    current = base
    for i, part in enumerate(rest):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return False
        except OSError:
            return True
        if i < len(rest) - 1 and not stat.S_ISDIR(st.st_mode):
            return stat.S_ISLNK(st.st_mode)
    return True


def _opaque(path: str) -> bool:
    for attr in OPAQUE_XATTRS:
        try:
            if os.getxattr(path, attr, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False
