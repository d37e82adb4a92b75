"""The grader's own programs in the agent container.

The agent is root in a container whose root filesystem it can write, so any program the daemon
finds through that container's `PATH` (`sh`, `sleep`, `timeout`, `cat`, ...) may be the agent's.
Everything the daemon runs there on its own behalf (the keep-alive, the leftover reaper, the check
runner's shell and its timeout, file reads through links) is instead a static busybox that svcd
copies once out of its stock image `localhost/svc/toolset:1` into a root-owned host directory and
bind-mounts read-only at `/.svc-tools`: the agent cannot write, replace or shadow it (no
`CAP_SYS_ADMIN` to remount), and a static binary ignores `LD_PRELOAD` and `/etc/ld.so.preload`.
It is always invoked by absolute path with a daemon-set `PATH`.

A check's own command still runs the image's programs (`python3`, `psql`, ...). Which of those the
agent replaced is the engine's filesystem diff (`tampered_paths`); the runner refuses to trust a
command check in such a container unless it runs `isolation: clean` (docs/explanation/security.md).
"""
from __future__ import annotations

import io
import os
import tarfile
import threading
from pathlib import Path, PurePosixPath

TOOLSET_IMAGE = "localhost/svc/toolset:1"
IMAGE_BUSYBOX = "/bin/busybox"
MOUNT = "/.svc-tools"
BIN = f"{MOUNT}/bin"
SH = f"{BIN}/sh"
BUSYBOX_CAP = 8 << 20
# The applets the daemon uses; each is a link to ../busybox in the host directory.
APPLETS = ("sh", "sleep", "timeout", "cat", "test", "kill", "ls", "env", "head", "readlink", "realpath", "printf", "true")
# The keep-alive starts nothing: were its sleep killed, the container ends (the agent's doing).
KEEP_ALIVE = [f"{BIN}/sleep", "2147483647"]
# The PATH of the image's own programs for a check's command: the daemon's, never the agent's.
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def tool(name: str) -> str:
    """The absolute path of one of the toolset's programs in the container."""
    assert name in APPLETS, name
    return f"{BIN}/{name}"


def trusted_env(path: str = BIN) -> dict[str, str]:
    """What a daemon-owned exec gets on top of the container's environment (which the daemon set at
    create time: the agent cannot change it): its own PATH and no shell start-up file."""
    return {"PATH": path, "ENV": "", "BASH_ENV": "", "CDPATH": "", "IFS": " \t\n"}


class ToolsetUnavailable(RuntimeError):
    """The toolset image is missing: no sandbox can be judged without it."""


_lock = threading.Lock()


def host_dir(home: Path) -> Path:
    """The host directory mounted at MOUNT, made once per daemon home from the toolset image.
    Blocking (engine calls): run it in a thread."""
    root = home / "toolset"
    ready = root / "bin" / "sh"
    with _lock:
        if ready.is_symlink() and (root / "busybox").is_file():
            return root
        data = _busybox_from_image()
        staging = home / f".toolset-{os.getpid()}"
        if staging.exists():
            _remove_tree(staging)
        (staging / "bin").mkdir(parents=True, mode=0o755)
        os.chmod(staging, 0o755)
        busybox = staging / "busybox"
        busybox.write_bytes(data)
        os.chmod(busybox, 0o555)
        for applet in APPLETS:
            os.symlink("../busybox", staging / "bin" / applet)
        if root.exists():
            _remove_tree(root)
        os.replace(staging, root)
        return root


def _busybox_from_image() -> bytes:
    import docker  # the SDK; the daemon's engine (DOCKER_HOST) holds the stock images

    try:
        client = docker.from_env(timeout=60)
    except Exception as exc:  # noqa: BLE001
        raise ToolsetUnavailable(f"cannot reach the Docker engine for the grader's toolset: {exc}") from None
    try:
        try:
            container = client.containers.create(TOOLSET_IMAGE)
        except docker.errors.ImageNotFound:
            raise ToolsetUnavailable(f"the grader's toolset image {TOOLSET_IMAGE} is missing: run `svc images build`") from None
        try:
            stream, _ = container.get_archive(IMAGE_BUSYBOX)
            raw = b"".join(stream)
        finally:
            container.remove(force=True)
    finally:
        client.close()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        member = tar.next()
        if member is None or not member.isfile() or member.size > BUSYBOX_CAP:
            raise ToolsetUnavailable(f"{TOOLSET_IMAGE} holds no regular {IMAGE_BUSYBOX}")
        handle = tar.extractfile(member)
        assert handle is not None
        return handle.read()


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# --- what the agent changed that a check may run ------------------------------------------------

# Where programs, their libraries and the dynamic loader's configuration live.
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/opt", "/etc/alternatives")
LOADER_FILES = ("/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
# Directories on IMAGE_PATH, in order, with merged-/usr aliases folded (/bin is /usr/bin in bookworm).
PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def tampered_paths(changes: list[dict[str, str]], resolved: dict[str, str]) -> list[str]:
    """The paths among the container's filesystem changes (leaves: `{"path", "change"}`, from the
    engine's diff) through which a check's command could run the agent's code instead of the image's:
    a program or library of the image modified or deleted, the loader's configuration touched, or a
    new program placed earlier on PATH than a same-named one. `resolved` maps each path
    `shadow_candidates` asked about that exists in the container to its real path (so that /bin/x,
    which is /usr/bin/x in a merged-/usr image, is not taken for another program). Adding new
    programs and libraries (installing software) is not tampering."""
    found = []
    for change in changes:
        path, kind = change["path"], change["change"]
        if _under(path, LOADER_FILES):
            found.append(path)
        elif kind in ("modified", "deleted") and _under(path, SYSTEM_DIRS):
            found.append(path)
        elif kind == "added" and any(resolved.get(later, path) != path for later in _later_on_path(path)):
            found.append(path)
    return sorted(set(found))


def _later_on_path(path: str) -> list[str]:
    p = PurePosixPath(path)
    parent = str(p.parent)
    if parent not in PATH_DIRS:
        return []
    return [f"{d}/{p.name}" for d in PATH_DIRS[PATH_DIRS.index(parent) + 1:]]


def shadow_candidates(changes: list[dict[str, str]]) -> list[str]:
    """For every file added directly in a PATH directory, the same name in the PATH directories after
    it: the paths `tampered_paths` needs resolved."""
    return sorted({later for c in changes if c["change"] == "added" for later in _later_on_path(c["path"])})


# Prints "path<TAB>real path" for each argument that exists: toolset applets only (run by SH with
# PATH=BIN), no program of the agent's.
RESOLVE_SH = r"""
for f; do
  if [ -e "$f" ]; then printf '%s\t%s\n' "$f" "$(realpath "$f")"; fi
done
"""


def parse_resolved(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        path, sep, real = line.partition("\t")
        if sep:
            out[path] = real
    return out
