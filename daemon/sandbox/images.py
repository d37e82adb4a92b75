"""Stock sandbox images, built from Debian packages.

No container registry is reachable on the build machines, so svc builds its
stock images itself: ``mmdebstrap`` makes a Debian bookworm root filesystem
tarball from a package list, ``docker import`` turns it into an image.

    python -m daemon.sandbox.images build [--force] [--jobs N] [IMAGE ...]
    python -m daemon.sandbox.images list

Images (all fully qualified):

``localhost/svc/python:3.11``
    python3 (3.11) with venv/pip, ``python`` -> python3, psql, redis-cli,
    curl, nc, ip, libfaketime + faketime. ``WORKDIR /workspace``,
    ``CMD ["python3"]``. ``pip install`` works system-wide (Debian's
    EXTERNALLY-MANAGED marker is removed: the container is thrown away).
    libfaketime: ``/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1``.

``localhost/svc/postgres:15``
    PostgreSQL 15 with an entrypoint that honours ``POSTGRES_USER``,
    ``POSTGRES_PASSWORD``, ``POSTGRES_DB`` like the official image (see
    ``rootfs/postgres-entrypoint.sh``). Port 5432, scram-sha-256 for TCP.
    ``pg_isready`` is on PATH; the log line "database system is ready to
    accept connections" is printed once, by the final server only. No
    ``VOLUME`` is declared (no anonymous volumes to leak).

``localhost/svc/redis:7``
    redis-server 7.0 (bookworm), runs as user ``redis`` in ``/data`` with
    ``--protected-mode no --bind 0.0.0.0 --save '' --appendonly no``.
    Port 6379. Readiness: ``redis-cli ping`` / "Ready to accept connections".

Every image carries the label ``svc.recipe=<hash>``; an image whose label
does not match the current recipe counts as missing and is rebuilt.
Root filesystem tarballs are cached under ``$SVC_IMAGE_CACHE`` (default
``~/.cache/svc/images``) keyed by a hash of the package list and the recipe,
so rebuilding after ``docker rmi`` takes seconds (import only).

This is a build tool: it shells out to ``mmdebstrap`` and the ``docker`` CLI
synchronously; never call it from the daemon's event loop directly (use
``asyncio.to_thread``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

# Bump to invalidate every cached tarball and image.
RECIPE_VERSION = 1

SUITE = "bookworm"
ROOTFS_DIR = Path(__file__).resolve().parent / "rootfs"
PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
LABEL = "svc.recipe"

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Keep images small: no docs, man pages, translations.
DPKG_OPTS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
    "path-exclude=/usr/share/linda/*",
    "path-exclude=/usr/share/groff/*",
)
APT_OPTS = (
    'APT::Install-Recommends "false"',
    'APT::Install-Suggests "false"',
    'Acquire::Retries "3"',
)

Log = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How to build one image.

    ``packages`` go to ``mmdebstrap --include``. ``essential_hooks`` run
    before the packages are installed, ``customize_hooks`` after; both are
    ``sh -c`` snippets where ``$1`` is the root directory. ``files`` maps a
    file under ``rootfs/`` to (path in image, mode). ``changes`` are
    ``docker import --change`` instructions.
    """

    packages: tuple[str, ...]
    changes: tuple[str, ...]
    essential_hooks: tuple[str, ...] = ()
    customize_hooks: tuple[str, ...] = ()
    files: tuple[tuple[str, str, int], ...] = ()
    # `docker import --change` cannot set STOPSIGNAL on older engines (20.10),
    # so it is set afterwards through the commit API.
    stop_signal: str | None = None
    # mmdebstrap's variant: "apt" makes a bootable Debian system; "extract" only unpacks the packages
    variant: str = "apt"

    def rootfs_key(self) -> str:
        """Hash of everything that ends up in the tarball."""
        h = hashlib.sha256()
        doc = {
            "v": RECIPE_VERSION,
            "suite": SUITE,
            "packages": sorted(self.packages),
            "dpkg": DPKG_OPTS,
            "apt": APT_OPTS,
            "essential": self.essential_hooks,
            "customize": self.customize_hooks,
            "files": [(src, dst, mode) for src, dst, mode in self.files],
        }
        if self.variant != "apt":
            doc["variant"] = self.variant
        h.update(json.dumps(doc, sort_keys=True).encode())
        for src, _, _ in self.files:
            h.update((ROOTFS_DIR / src).read_bytes())
        return h.hexdigest()[:16]

    def image_key(self) -> str:
        """Hash of the tarball key plus the image config."""
        h = hashlib.sha256()
        h.update(self.rootfs_key().encode())
        h.update(json.dumps([self.changes, self.stop_signal]).encode())
        return h.hexdigest()[:16]


STOCK_IMAGES: dict[str, Recipe] = {
    "localhost/svc/python:3.11": Recipe(
        packages=(
            "python3", "python3-venv", "python3-pip", "python-is-python3",
            "ca-certificates", "curl", "procps", "coreutils",
            "postgresql-client", "redis-tools", "libfaketime", "faketime",
            "iproute2", "netcat-openbsd",
        ),
        customize_hooks=(
            'mkdir -p "$1/workspace"',
            # Throw-away sandboxes: let `pip install` work system-wide.
            'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED',
            'ln -sf python3 "$1/usr/bin/python"',
        ),
        changes=(
            f"ENV PATH={DEFAULT_PATH}",
            "ENV LANG=C.UTF-8",
            "ENV PIP_DISABLE_PIP_VERSION_CHECK=1",
            "WORKDIR /workspace",
            'CMD ["python3"]',
        ),
    ),
    "localhost/svc/postgres:15": Recipe(
        packages=("postgresql-15", "procps"),
        essential_hooks=(
            # No default cluster in /var/lib/postgresql/15/main: the
            # entrypoint runs initdb on first start.
            'mkdir -p "$1/etc/postgresql-common/createcluster.d"',
            'echo "create_main_cluster = false" '
            '> "$1/etc/postgresql-common/createcluster.d/svc.conf"',
        ),
        customize_hooks=(
            'rm -rf "$1/var/lib/postgresql/15/main" "$1/etc/postgresql/15/main"',
            # Drop the LLVM JIT provider (~130 MB: libLLVM + libz3). Without
            # llvmjit.so PostgreSQL silently runs without JIT; the entrypoint
            # also sets jit = off.
            'rm -rf "$1"/usr/lib/postgresql/15/lib/llvmjit* '
            '"$1"/usr/lib/postgresql/15/lib/bitcode '
            '"$1"/usr/lib/x86_64-linux-gnu/libLLVM-*.so* '
            '"$1"/usr/lib/x86_64-linux-gnu/libz3.so*',
            'mkdir -p "$1/var/lib/postgresql/data" "$1/var/run/postgresql" '
            '"$1/docker-entrypoint-initdb.d"',
            'chroot "$1" chown postgres:postgres /var/lib/postgresql/data /var/run/postgresql',
            'chmod 700 "$1/var/lib/postgresql/data"',
            'chmod 2775 "$1/var/run/postgresql"',
        ),
        files=(("postgres-entrypoint.sh", "/usr/local/bin/docker-entrypoint.sh", 0o755),),
        changes=(
            f"ENV PATH=/usr/lib/postgresql/15/bin:{DEFAULT_PATH}",
            "ENV LANG=C.UTF-8",
            "ENV PGDATA=/var/lib/postgresql/data",
            'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]',
            'CMD ["postgres"]',
            "EXPOSE 5432",
        ),
        # Fast shutdown on `docker stop` (SIGTERM would be a "smart" shutdown
        # that waits for every client to disconnect).
        stop_signal="SIGINT",
    ),
    "localhost/svc/redis:7": Recipe(
        packages=("redis-server",),
        customize_hooks=(
            'mkdir -p "$1/data"',
            'chroot "$1" chown redis:redis /data',
        ),
        changes=(
            f"ENV PATH={DEFAULT_PATH}",
            "ENV LANG=C.UTF-8",
            "USER redis",
            "WORKDIR /data",
            'CMD ["redis-server", "--protected-mode", "no", "--bind", "0.0.0.0", '
            '"--port", "6379", "--save", "", "--appendonly", "no"]',
            "EXPOSE 6379",
        ),
    ),
    # The grader's own programs (daemon/sandbox/toolset.py): a static busybox that svcd copies out
    # once and mounts read-only into every agent container, so that nothing the daemon runs there
    # on its own behalf comes from a file the agent could have replaced.
    "localhost/svc/toolset:1": Recipe(
        packages=("busybox-static",),
        variant="extract",
        changes=('CMD ["/bin/busybox", "true"]',),
    ),
}


class ImageBuildError(RuntimeError):
    pass


def cache_dir() -> Path:
    d = os.environ.get("SVC_IMAGE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "svc", "images"
    )
    return Path(d)


def _slug(name: str) -> str:
    return name.replace("localhost/", "").replace("/", "-").replace(":", "-")


def _mirrors() -> list[str]:
    debian = os.environ.get("SVC_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    security = os.environ.get(
        "SVC_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security"
    )
    return [
        f"deb {debian} {SUITE} main",
        f"deb {debian} {SUITE}-updates main",
        f"deb {security} {SUITE}-security main",
    ]


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check
    )


def image_recipe_label(name: str) -> str | None:
    """The image's ``svc.recipe`` label; None when the image is missing."""
    p = _docker("image", "inspect", "--format", "{{json .Config.Labels}}", name, check=False)
    if p.returncode != 0:
        return None
    labels = json.loads(p.stdout.strip() or "null") or {}
    return str(labels.get(LABEL, ""))


def _image_id(name: str) -> str | None:
    p = _docker("image", "inspect", "--format", "{{.Id}}", name, check=False)
    return p.stdout.strip() if p.returncode == 0 else None


def image_is_current(name: str) -> bool:
    return image_recipe_label(name) == STOCK_IMAGES[name].image_key()


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Inter-process lock: two test sessions must not build the same image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _mmdebstrap_cmd(recipe: Recipe, out: Path) -> list[str]:
    cmd = [
        "mmdebstrap",
        f"--variant={recipe.variant}",
        "--mode=root",
        "--format=tar",
        f"--include={','.join(recipe.packages)}",
    ]
    cmd += [f"--dpkgopt={o}" for o in DPKG_OPTS]
    cmd += [f"--aptopt={o}" for o in APT_OPTS]
    cmd += [f"--essential-hook={h}" for h in recipe.essential_hooks]
    for src, dst, mode in recipe.files:
        s = shlex.quote(str(ROOTFS_DIR / src))
        d = shlex.quote(dst.lstrip("/"))
        cmd.append(
            f'--customize-hook=install -D -m {mode:o} {s} "$1"/{d}'
        )
    cmd += [f"--customize-hook={h}" for h in recipe.customize_hooks]
    cmd += [SUITE, str(out), *_mirrors()]
    return cmd


def rootfs_tarball(name: str, force: bool = False, log: Log = print) -> tuple[Path, bool]:
    """Return (path of the cached rootfs tarball, whether it was built now).

    Callers hold the image's lock (see ``build_image``).
    """
    recipe = STOCK_IMAGES[name]
    cdir = cache_dir()
    slug = _slug(name)
    tar = cdir / f"{slug}-{recipe.rootfs_key()}.tar"
    if tar.exists() and not force:
        return tar, False
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError(
            "mmdebstrap is not installed (apt-get install mmdebstrap); "
            "it is needed to build " + name
        )
    logfile = cdir / f"{slug}.log"
    fd, tmp_name = tempfile.mkstemp(prefix=f".{slug}-", suffix=".tar", dir=cdir)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = _mmdebstrap_cmd(recipe, tmp)
    log(f"{name}: mmdebstrap {SUITE} ({len(recipe.packages)} packages), log: {logfile}")
    t0 = time.monotonic()
    try:
        with open(logfile, "w") as lf:
            lf.write("$ " + shlex.join(cmd) + "\n")
            lf.flush()
            p = subprocess.run(
                cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
        if p.returncode != 0:
            tail = "".join(logfile.read_text(errors="replace").splitlines(True)[-30:])
            raise ImageBuildError(
                f"mmdebstrap failed for {name} (exit {p.returncode}); "
                f"last lines of {logfile}:\n{tail}"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, tar)
    finally:
        tmp.unlink(missing_ok=True)
    # Drop tarballs of older recipes of this image.
    for old in cdir.glob(f"{slug}-*.tar"):
        if old != tar:
            old.unlink(missing_ok=True)
    log(f"{name}: rootfs {tar.stat().st_size / 1e6:.0f} MB in {time.monotonic() - t0:.1f}s")
    return tar, True


def build_image(name: str, force: bool = False, log: Log = print) -> bool:
    """Build one stock image (rootfs from cache when possible) and import it.

    Returns False when another process built it meanwhile (not forced).
    """
    recipe = STOCK_IMAGES[name]
    cdir = cache_dir()
    cdir.mkdir(parents=True, exist_ok=True)
    with _lock(cdir / f"{_slug(name)}.lock"):
        if not force and image_is_current(name):
            return False
        t0 = time.monotonic()
        tar, _ = rootfs_tarball(name, force=force, log=log)
        args = ["import"]
        for change in (*recipe.changes, f"LABEL {LABEL}={recipe.image_key()}"):
            args += ["--change", change]
        old_id = _image_id(name)
        args += ["--message", f"svc stock image {name}", str(tar), name]
        p = _docker(*args, check=False)
        if p.returncode != 0:
            raise ImageBuildError(f"docker import failed for {name}: {p.stderr.strip()}")
        if recipe.stop_signal:
            _set_stop_signal(name, recipe.stop_signal)
        if old_id and old_id != _image_id(name):
            # The previous build is now untagged; drop it unless a container uses it.
            _docker("image", "rm", old_id, check=False)
        log(f"{name}: imported in {time.monotonic() - t0:.1f}s total")
        return True


def _set_stop_signal(name: str, signal: str) -> None:
    """Re-commit ``name`` with ``StopSignal`` set (the commit API takes a full
    config body; fields left out are merged from the image)."""
    import docker  # the SDK, only needed here

    client = docker.from_env()
    try:
        container = client.containers.create(name)
        try:
            repo, _, tag = name.rpartition(":")
            container.commit(
                repository=repo, tag=tag, message=f"svc stock image {name}",
                conf={"StopSignal": signal},
            )
        finally:
            container.remove(force=True)
    finally:
        client.close()


def missing_images(names: list[str] | None = None) -> list[str]:
    return [n for n in (names or list(STOCK_IMAGES)) if not image_is_current(n)]


def ensure_stock_images(
    force: bool = False,
    log: Log = print,
    names: list[str] | None = None,
    jobs: int | None = None,
) -> list[str]:
    """Build every stock image that is missing (or outdated); return the names built.

    Present, current images are skipped unless ``force`` (which also rebuilds
    the cached root filesystems). Builds run in parallel (``jobs``, default
    ``$SVC_IMAGE_JOBS`` or 3).
    """
    names = list(names or STOCK_IMAGES)
    unknown = [n for n in names if n not in STOCK_IMAGES]
    if unknown:
        raise ValueError(f"not a stock image: {', '.join(unknown)}")
    if shutil.which("docker") is None:
        raise ImageBuildError("the docker CLI is not installed")
    todo = names if force else missing_images(names)
    if not todo:
        return []
    jobs = jobs or int(os.environ.get("SVC_IMAGE_JOBS", "3"))
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(todo)))) as pool:
        futures = {n: pool.submit(build_image, n, force, log) for n in todo}
        built, errors = [], []
        for n, f in futures.items():
            try:
                if f.result():
                    built.append(n)
            except Exception as e:  # report every failure, not only the first
                errors.append(e)
    if errors:
        raise ImageBuildError("\n".join(str(e) for e in errors))
    return built


def _size(name: str) -> str:
    p = _docker("image", "inspect", "--format", "{{.Size}}", name, check=False)
    return f"{int(p.stdout) / 1e6:.0f} MB" if p.returncode == 0 else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m daemon.sandbox.images", description="svc stock images"
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build missing or outdated stock images")
    b.add_argument("images", nargs="*", help="images to build (default: all)")
    b.add_argument("--force", action="store_true", help="rebuild even if present (and re-run mmdebstrap)")
    b.add_argument("--jobs", "-j", type=int, default=None, help="parallel builds (default 3)")
    sub.add_parser("list", help="show stock images and whether they are current")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.cmd == "list":
        for name, recipe in STOCK_IMAGES.items():
            label = image_recipe_label(name)
            state = (
                "missing" if label is None
                else "current" if label == recipe.image_key() else "outdated"
            )
            print(f"{name:30} {state:9} {_size(name)}")
        return 0

    t0 = time.monotonic()
    try:
        built = ensure_stock_images(
            force=args.force, log=log, names=args.images or None, jobs=args.jobs
        )
    except (ImageBuildError, ValueError) as e:
        log(f"error: {e}")
        return 1
    if built:
        log(f"built {len(built)} image(s) in {time.monotonic() - t0:.1f}s: {', '.join(built)}")
    else:
        log("stock images are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
