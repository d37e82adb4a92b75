"""The workspace seam: a sandbox's /workspace as a directory on the daemon's host.

The daemon keeps the canonical copy of every workspace on its own host: the local engine bind-mounts
it into the agent's container, the swarm engine mirrors it to the node running the agent
(engine/swarm/mirror.py). Creating and removing that directory is the daemon's (boot.py, lifecycle.py);
every read and write of what is in it goes through `HostWorkspace` (the manager's `workspaces`).
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from daemon.sandbox import diskquota
from daemon.sandbox import workspace as ws


class HostWorkspace:
    """Every touch of a sandbox's /workspace by the daemon, on its host directory (`workspace`: the
    bind mount; on a swarm, the mirror kept in step with the container). Paths are
    workspace-relative and normalised (workspace.normalize); nothing is opened through a link
    (workspace.py). Errors are workspace.py's (PathError, FileMissing, NotRegularFile) and OSError."""

    async def manifest(self, workspace: Path) -> list[dict[str, Any]]:
        return await asyncio.to_thread(ws.manifest, str(workspace))

    async def usage(self, workspace: Path, stop_above: int | None = None) -> int:
        """The tree's apparent size in bytes (the walk stops once above `stop_above`)."""
        return await asyncio.to_thread(ws.disk_usage, str(workspace), stop_above)

    async def fs_usage(self, workspace: Path) -> diskquota.Usage:
        """statvfs of a workspace on its own filesystem; one syscall, so inline."""
        return diskquota.usage(workspace)

    async def read(self, workspace: Path, rel: str, limit: int | None = None) -> bytes:
        return await asyncio.to_thread(ws.read_file, str(workspace), rel, limit)

    async def open(self, workspace: Path, rel: str) -> int:
        """A read-only fd of a regular file (the caller closes it)."""
        return await asyncio.to_thread(ws.open_under, str(workspace), rel, os.O_RDONLY)

    async def lstat(self, workspace: Path, rel: str) -> os.stat_result | None:
        return await asyncio.to_thread(ws.lstat, str(workspace), rel)

    async def write(self, workspace: Path, rel: str, data: bytes) -> dict[str, Any]:
        return await asyncio.to_thread(ws.write_file, str(workspace), rel, data)

    async def replace(self, workspace: Path, rel: str, data: bytes, mode: int = 0o644) -> None:
        """Replaced atomically (the daemon's own files under .svc)."""
        await asyncio.to_thread(ws.replace_file, str(workspace), rel, data, mode)

    async def delete(self, workspace: Path, rel: str) -> None:
        await asyncio.to_thread(ws.delete_file, str(workspace), rel)

    async def fixture(self, workspace: Path, entries: list[tuple[str, bytes, int]], name: str | None, to: str) -> None:
        """An uploaded fixture (workspace.write_fixture: one file, or a directory's files) at `to`."""
        await asyncio.to_thread(ws.write_fixture, entries, name, str(workspace), to)

    async def archive(self, workspace: Path, target: Path) -> None:
        """The tree as a gzipped tar at `target` (host path), rooted at `workspace/`."""
        await asyncio.to_thread(ws.tar_tree, str(workspace), target)
