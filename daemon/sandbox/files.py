"""The workspace of a sandbox as the daemon serves it: files (paths as clients send them; nothing
opened through a link: workspace.py), the manifest and diff since boot, and the disk limit
(`resources.disk`: statvfs of its own filesystem, or the tree's size when SERVICE_WORKSPACE_QUOTA=off):
`WorkspaceFiles`, a part of `SandboxManager` sharing its registry of live sandboxes."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from daemon.errors import InvalidRequest, NotFound
from daemon.sandbox import workspace as ws
from daemon.sandbox.audit import AuditLog
from daemon.contract.sandboxes import LIVE_STATES
from daemon.sandbox.host_workspace import HostWorkspace
from daemon.sandbox.runtime import BackgroundTasks, LiveSandboxes, SandboxRuntime, size_text
from daemon.store import sandboxes as sandbox_store
from daemon.util import now_iso

if TYPE_CHECKING:
    from daemon.store.db import Store

log = logging.getLogger("svcd.sandbox")

SIZE_CHECK_INTERVAL_S = 1.0
DISK_POLL_S = 0.25  # statvfs of an enforced workspace while the sandbox lives


class WorkspaceFiles:
    """The workspaces of live sandboxes; every touch of one goes through `workspaces`."""

    def __init__(self, store: Store, workspaces: HostWorkspace, live: LiveSandboxes, tasks: BackgroundTasks):
        self.store = store
        self.workspaces = workspaces
        self.live = live
        self.tasks = tasks

    async def check_workspace_size(self, sb: SandboxRuntime, force: bool = False) -> None:
        """Has the workspace hit `limits.disk`? Then a `warning` audit event (once) and
        `limits_exceeded: ["workspace"]` (the runner makes that an `error` verdict).

        Enforced (its own filesystem, diskquota.py): one statvfs, "full" when less than
        `full_margin` is left; after every command and file write and every DISK_POLL_S.
        SERVICE_WORKSPACE_QUOTA=off: the apparent size of the tree against the limit, after every
        command and file write; when the last walk of the workspace was slow (big trees), at most
        every SIZE_CHECK_INTERVAL_S, with a deferred check so a change is never missed."""
        if "workspace" in sb.limits_exceeded:
            return
        if sb.disk_mounted:
            try:
                use = await self.workspaces.fs_usage(sb.workspace)
            except OSError:
                return
            if use.full:
                await self._workspace_limit_reached(sb, use.used, enforced=True)
            return
        now = time.monotonic()
        if not force and sb.size_check_cost > 0.05 and now - sb.size_checked < SIZE_CHECK_INTERVAL_S * 5:
            if sb.size_check_pending is None or sb.size_check_pending.done():
                async def later() -> None:
                    await asyncio.sleep(SIZE_CHECK_INTERVAL_S * 5)
                    if sb.id in self.live:
                        await self.check_workspace_size(sb, force=True)

                sb.size_check_pending = self.tasks.spawn(later())
            return
        sb.size_checked = now
        size = await self.workspaces.usage(sb.workspace, sb.limits.disk)
        sb.size_check_cost = time.monotonic() - now
        if size > sb.limits.disk:
            await self._workspace_limit_reached(sb, size, enforced=False)

    async def _workspace_limit_reached(self, sb: SandboxRuntime, size: int, enforced: bool) -> None:
        if "workspace" in sb.limits_exceeded:
            return
        sb.limits_exceeded.append("workspace")
        if enforced:
            message = (f"the workspace reached its {size_text(sb.limits.disk)} limit (resources.disk): writes beyond it "
                       "fail with 'No space left on device'")
        else:
            message = f"the workspace holds more than its {size_text(sb.limits.disk)} limit (resources.disk)"
        sb.disk_exceeded = {"kind": "workspace_size", "limit_bytes": sb.limits.disk, "size_bytes": size,
                            "enforced": enforced, "message": message}
        log.info("sandbox %s: %s", sb.id, message)
        if sb.audit is not None:
            sb.audit.record("warning", dict(sb.disk_exceeded))
        await sandbox_store.update(self.store, sb.id, limits_exceeded=sb.limits_exceeded)

    async def watch_disk(self, sb: SandboxRuntime) -> None:
        """Polls an enforced workspace (a cheap statvfs) so hitting the limit is noticed even when no
        command ends, e.g. an image agent or a long-running process."""
        while sb.id in self.live and sb.state in LIVE_STATES and "workspace" not in sb.limits_exceeded:
            await asyncio.sleep(DISK_POLL_S)
            try:
                await self.check_workspace_size(sb)
            except Exception:  # noqa: BLE001 - never let the watch kill anything
                log.exception("workspace size check of %s failed", sb.id)
                return

    async def workspace_limit(self, sandbox_id: str) -> dict[str, Any] | None:
        """After one more check: the `warning` details when the sandbox's workspace hit its disk
        limit (resources.disk) at any point, else None."""
        sb = self.live.get(sandbox_id)
        if sb is None:
            return None
        await self.check_workspace_size(sb, force=True)
        return dict(sb.disk_exceeded) if sb.disk_exceeded else None

    async def state(self, sandbox_id: str) -> dict[str, Any]:
        sb = await self.live.require_ready(sandbox_id)
        files = await self.workspaces.manifest(sb.workspace)
        return {"sandbox_id": sb.id, "root": ws.ROOT, "taken_at": now_iso(), "files": files}

    async def diff(self, sandbox_id: str) -> dict[str, Any]:
        sb = await self.live.require_ready(sandbox_id)
        files = await self.workspaces.manifest(sb.workspace)
        changes = ws.diff(sb.manifest or [], files)
        return {"sandbox_id": sb.id, "since": sb.manifest_taken_at, **changes}

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> dict[str, Any]:
        rel = checked_path(path)
        if ws.is_reserved(rel):
            raise InvalidRequest(f"'{path}' is inside /workspace/.svc, which the daemon owns; write elsewhere")
        sb = await self.live.require_ready(sandbox_id)
        try:
            result = await self.workspaces.write(sb.workspace, rel, data)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        await self.check_workspace_size(sb, force=True)
        return result

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        rel = checked_path(path)
        sb = await self.live.require_ready(sandbox_id)
        if rel == AuditLog.COPY and sb.audit is not None:
            # the daemon's own copy (audit.py), not whatever the agent left in the workspace
            return await asyncio.to_thread(sb.audit.raw)
        try:
            return await self.workspaces.read(sb.workspace, rel)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        except (ws.FileMissing, FileNotFoundError):
            raise NotFound("file", rel, f"no file '{rel}' in the workspace of sandbox '{sandbox_id}'")

    async def open_file(self, sandbox_id: str, path: str) -> tuple[int, int] | bytes:
        """For streaming (GET .../files/{path}): `(fd, size)` of the workspace file, opened like
        read_file opens it (the caller closes the fd), or the bytes when the daemon serves its own
        copy (the audit log)."""
        rel = checked_path(path)
        sb = await self.live.require_ready(sandbox_id)
        if rel == AuditLog.COPY and sb.audit is not None:
            return await asyncio.to_thread(sb.audit.raw)
        try:
            fd = await self.workspaces.open(sb.workspace, rel)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        except (ws.FileMissing, FileNotFoundError):
            raise NotFound("file", rel, f"no file '{rel}' in the workspace of sandbox '{sandbox_id}'")
        return fd, os.fstat(fd).st_size

    async def delete_file(self, sandbox_id: str, path: str) -> None:
        rel = checked_path(path)
        if ws.is_reserved(rel):
            raise InvalidRequest(f"'{path}' is inside /workspace/.svc, which the daemon owns")
        sb = await self.live.require_ready(sandbox_id)
        try:
            await self.workspaces.delete(sb.workspace, rel)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        except (ws.FileMissing, FileNotFoundError):
            raise NotFound("file", rel, f"no file '{rel}' in the workspace of sandbox '{sandbox_id}'")



def checked_path(path: str) -> str:
    try:
        rel = ws.normalize(path)
    except ws.PathError as exc:
        raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
    if len(rel.encode("utf-8", "surrogatepass")) > 4096 or any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in rel.split("/")):
        message = "path is too long (at most 4096 bytes, 255 per file or directory name)"
        raise InvalidRequest(message, [{"loc": "path", "msg": message}])
    return rel

