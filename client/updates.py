"""Self-update: the newest `svc` on the configured package index (PEP 503 simple API:
`SERVICE_UPDATE_INDEX`, else `update_index` in config.toml), the in-place upgrade with pip, and the
automatic check. There is no default index: the name `svc` on PyPI belongs to another project, so
asking PyPI would offer a stranger's package as an upgrade.

The automatic check runs at most once per 24 h in a detached process (1.5 s timeout, silent on any
failure) and writes what it found to `$XDG_CACHE_HOME/svc/update-check.json`; the next command prints
one line when a newer version exists. It is skipped for editable/checkout installs, for `svc update`
itself, when `SERVICE_NO_AUTO_UPDATE` is set and when no index is configured."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from importlib import metadata
from pathlib import Path

DIST = "svc"
CHECK_EVERY_S = 24 * 3600
CHECK_TIMEOUT_S = 1.5
MAX_INDEX_PAGE_BYTES = 4 * 1024 * 1024
WHEEL_OR_SDIST = re.compile(r"^svc-([0-9][A-Za-z0-9.+!-]*?)(?:-py[^/]*\.whl|\.tar\.gz|\.zip)$", re.I)


def index_url() -> str | None:
    """The configured index (environment, then config.toml), or None. Raises ConfigFileError."""
    from client.config import read_config_file

    url = os.environ.get("SERVICE_UPDATE_INDEX") or read_config_file().get("update_index")
    return str(url).rstrip("/") + "/" if url else None


def shown(url: str) -> str:
    """The URL as messages show it: a private index's user:token@ part is never printed."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"***@{host}" + (f":{port}" if port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def installed_version() -> str | None:
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return None


def is_dev_install() -> bool:
    """An editable install, or code running from a source tree (a checkout's pyproject.toml beside it)."""
    import client

    if (Path(client.__file__).resolve().parent.parent / "pyproject.toml").exists():
        return True
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return True
    direct = dist.read_text("direct_url.json")
    try:
        return bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))
    except ValueError:
        return False


RELEASE = re.compile(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?")


def _version_key(version: str) -> tuple[int, ...] | None:
    """A comparable key for final releases (1.2, 1.2.3.post1); None for pre-releases, dev and local
    versions, which the update never picks (the standard library has no version parser)."""
    match = RELEASE.fullmatch(version.strip())
    if not match:
        return None
    parts = [int(p) for p in match.group(1).split(".")]
    parts += [0] * (6 - len(parts))
    return (*parts[:6], int(match.group(2) or 0))


def newest_version(index: str, timeout: float) -> str | None:
    """The highest release listed on the index's svc page (pre-releases ignored)."""
    url = urllib.parse.urljoin(index, f"{DIST}/")
    request = urllib.request.Request(url, headers={"Accept": "text/html", "User-Agent": "svc-update"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the configured index)
        page = response.read(MAX_INDEX_PAGE_BYTES).decode("utf-8", "replace")
    versions = []
    for href in re.findall(r'href="([^"]+)"', page):
        name = urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1])
        match = WHEEL_OR_SDIST.match(name)
        key = _version_key(match.group(1)) if match else None
        if key is not None:
            versions.append((key, match.group(1)))
    return max(versions)[1] if versions else None


def is_newer(candidate: str | None, current: str | None) -> bool:
    if candidate is None or current is None:
        return False
    new, old = _version_key(candidate), _version_key(current)
    return bool(new and old and new > old)


def pip_upgrade(version: str, index: str, reinstall: bool) -> subprocess.CompletedProcess:
    """`reinstall`: the same (or an older) version again; only svc itself, its dependencies stay as they are."""
    command = [sys.executable, "-P", "-m", "pip", "install", "--disable-pip-version-check", "--upgrade",
               "--index-url", index, f"{DIST}=={version}"]
    if reinstall:
        command[5:5] = ["--force-reinstall", "--no-deps"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


# --- the automatic check -------------------------------------------------------------------------------


def state_path() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "svc" / "update-check.json"


def read_state() -> dict:
    try:
        data = json.loads(state_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_state(state: dict) -> None:
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def auto_check(command: str | None) -> str | None:
    """Called by every CLI command: the one-line notice of a newer version found by an earlier check
    (or None), and a detached check started when the last one is 24 h old. Never raises."""
    if command == "update" or os.environ.get("SERVICE_NO_AUTO_UPDATE"):
        return None
    try:
        if is_dev_install() or index_url() is None:
            return None
        state = read_state()
        current = installed_version()
        if time.time() - float(state.get("checked_at", 0)) >= CHECK_EVERY_S:
            write_state({**state, "checked_at": time.time()})  # claim this period before spawning
            subprocess.Popen([sys.executable, "-P", "-m", "client.updates", "check"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        latest = state.get("latest")
        if is_newer(latest, current):
            return f"svc {latest} is available (installed: {current}); run `svc update`"
    except Exception:  # the check must never break a command
        return None
    return None


def run_check() -> None:
    """The detached half: ask the index, record the answer; silent on any failure."""
    try:
        latest = newest_version(index_url() or "", CHECK_TIMEOUT_S)
    except Exception:
        return
    write_state({**read_state(), "checked_at": time.time(), "latest": latest})


if __name__ == "__main__" and sys.argv[1:] == ["check"]:
    run_check()
