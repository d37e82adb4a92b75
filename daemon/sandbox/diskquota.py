"""The workspace disk limit (`resources.disk`, default 2 GiB), enforced by the kernel.

Each sandbox's workspace directory (`$SERVICE_HOME/workspaces/<id>`, bind-mounted at /workspace)
is the mount point of its own ext4 filesystem, made in a sparse file `$SERVICE_HOME/sandbox-disks/
<id>.img` exactly the size of the limit and loop-mounted `nosuid,nodev`. A write past the limit
fails inside the container with ENOSPC and the host never holds more than the limit for the
workspace (metadata included: the usable space is a little smaller, about 3% at 2 GiB and 10% at
32 MiB). The image is sparse, so an empty workspace costs almost nothing on the host.

    attach(sandbox_id, mountpoint, size)   boot step 3 (`workspace`); ~15-30 ms
    detach(sandbox_id, mountpoint)         teardown: unmount (lazily if busy), delete the image
    reap(live_ids)                         daemon start: the same for every sandbox not live
    usage(mountpoint) -> Usage             statvfs: total, used, available bytes

Every step that fails raises BootFailure("workspace", ...) naming the step (root, mkfs.ext4,
loop mount...) and the way out: `SERVICE_WORKSPACE_QUOTA=off` keeps the workspace a plain
directory whose size is only checked after commands (a `warning` audit event), as before.

A workspace counts as full when less than `full_margin(total)` is left: ext4 refuses a write a bit
before the last block (about 0.6 MiB at 32 MiB with 1 MiB writes), so "full" means the agent ran
into the limit. The manager polls `usage` (one statvfs) while the sandbox lives and after every
command.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from daemon.sandbox.models import BootFailure

if TYPE_CHECKING:
    from daemon.config import Settings

log = logging.getLogger("svcd.sandbox.disk")

MIN_BYTES = 1024**2  # mkfs.ext4 needs some room; a smaller limit gets a 1 MiB filesystem
TOOL_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
MKFS_ARGS = ["-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", "-L", "svc-workspace"]
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,noinit_itable"
STEP_TIMEOUT_S = 60
OFF_HINT = ("set SERVICE_WORKSPACE_QUOTA=off to run sandboxes with a workspace size that is only checked, "
            "not enforced (an agent can then fill the host's disk)")


@dataclass
class Usage:
    total: int
    used: int
    available: int

    @property
    def full(self) -> bool:
        return self.available < full_margin(self.total)


def full_margin(total: int) -> int:
    """Less than this left counts as full: max(1 MiB, min(total/64, 8 MiB))."""
    return max(1024**2, min(total // 64, 8 * 1024**2))


def usage(mountpoint: Path | str) -> Usage:
    st = os.statvfs(mountpoint)
    return Usage(total=st.f_blocks * st.f_frsize, used=(st.f_blocks - st.f_bfree) * st.f_frsize,
                 available=st.f_bavail * st.f_frsize)


def _unescape(field: str) -> str:
    """/proc/self/mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1:i + 4]) == 3 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points(under: Path) -> list[str]:
    """Mount points at or below `under` (deepest first), from /proc/self/mountinfo."""
    base = os.path.realpath(under)
    found = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 4:
                    point = _unescape(fields[4])
                    if point == base or point.startswith(base + "/"):
                        found.append(point)
    except OSError:
        return []
    return sorted(set(found), key=len, reverse=True)


class WorkspaceDisks:
    """Loop-mounted, size-limited workspace filesystems of one daemon (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.enabled: bool = bool(getattr(settings, "workspace_quota", True))
        self.images_dir: Path = Path(settings.home) / "sandbox-disks"
        self.workspaces_dir: Path = Path(settings.workspaces_dir)

    def image(self, sandbox_id: str) -> Path:
        return self.images_dir / f"{sandbox_id}.img"

    @staticmethod
    def _tool(name: str, package: str) -> str:
        found = shutil.which(name, path=TOOL_PATH)
        if found is None:
            raise BootFailure("workspace", f"cannot enforce the workspace disk limit: `{name}` not found "
                                           f"(install {package}); {OFF_HINT}")
        return found

    @staticmethod
    def _run(step: str, argv: list[str]) -> None:
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BootFailure("workspace", f"cannot enforce the workspace disk limit: {step} failed: {exc}; {OFF_HINT}")
        if result.returncode != 0:
            why = (result.stderr or result.stdout).strip().splitlines()
            raise BootFailure("workspace", f"cannot enforce the workspace disk limit: {step} (`{' '.join(argv)}`) "
                                           f"exited with {result.returncode}: {' / '.join(why[-3:]) or 'no output'}; "
                                           f"{OFF_HINT}")

    def attach(self, sandbox_id: str, mountpoint: Path, size: int) -> float:
        """Make `mountpoint` (an existing empty directory) a filesystem of `size` bytes; returns the
        seconds it took. Raises BootFailure naming the step that failed."""
        started = time.perf_counter()
        if os.geteuid() != 0:
            raise BootFailure("workspace", "cannot enforce the workspace disk limit: loop-mounting the workspace "
                                           f"filesystem needs root (the daemon runs as uid {os.geteuid()}); {OFF_HINT}")
        mkfs = self._tool("mkfs.ext4", "e2fsprogs")
        mount = self._tool("mount", "mount (util-linux)")
        if not (os.path.exists("/dev/loop-control") or any(Path("/dev").glob("loop[0-9]*"))):
            raise BootFailure("workspace", "cannot enforce the workspace disk limit: this host has no loop devices "
                                           f"(/dev/loop-control; `modprobe loop`); {OFF_HINT}")
        image = self.image(sandbox_id)
        try:
            self.images_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.ftruncate(fd, max(int(size), MIN_BYTES))  # sparse: no block is written
            finally:
                os.close(fd)
        except OSError as exc:
            raise BootFailure("workspace", f"cannot enforce the workspace disk limit: creating the filesystem image "
                                           f"{image} failed: {exc}; {OFF_HINT}")
        try:
            self._run("mkfs.ext4", [mkfs, *MKFS_ARGS, str(image)])
            self._run("loop mount", [mount, "-t", "ext4", "-o", MOUNT_OPTIONS, str(image), str(mountpoint)])
            if not os.path.ismount(mountpoint):
                raise BootFailure("workspace", f"cannot enforce the workspace disk limit: {mountpoint} is not a mount "
                                               f"point after `mount`; {OFF_HINT}")
            try:
                os.rmdir(mountpoint / "lost+found")  # not the agent's business (fsck would make it again)
            except OSError:
                pass
        except BaseException:
            self.detach(sandbox_id, mountpoint)
            raise
        return time.perf_counter() - started

    def detach(self, sandbox_id: str, mountpoint: Path) -> None:
        """Unmount the workspace (lazily when something still holds it) and delete its image.
        Never raises."""
        if os.path.ismount(mountpoint):
            self._umount(str(mountpoint))
        try:
            self.image(sandbox_id).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot delete the workspace image of %s: %s", sandbox_id, exc)

    @staticmethod
    def _umount(point: str) -> bool:
        umount = shutil.which("umount", path=TOOL_PATH) or "umount"
        for argv in ([umount, point], [umount, "-l", point]):
            try:
                result = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("%s failed: %s", " ".join(argv), exc)
                continue
            if result.returncode == 0:
                if "-l" in argv:
                    log.warning("workspace %s was busy: detached lazily", point)
                return True
            log.info("%s: %s", " ".join(argv), result.stderr.strip())
        log.error("cannot unmount workspace %s", point)
        return False

    def reap(self, live: Iterable[str]) -> int:
        """Unmount workspace filesystems and delete images of sandboxes that are not live (a crash
        or kill -9 of a previous run). Returns how many were released."""
        live = set(live)
        released = 0
        for point in mount_points(self.workspaces_dir):
            rel = os.path.relpath(point, os.path.realpath(self.workspaces_dir))
            if rel == "." or rel.split("/")[0] in live:
                continue
            if self._umount(point):
                released += 1
        try:
            images = list(self.images_dir.glob("*.img"))
        except OSError:
            images = []
        for image in images:
            if image.stem in live:
                continue
            try:
                image.unlink()
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    log.warning("cannot delete leftover workspace image %s: %s", image, exc)
        return released
