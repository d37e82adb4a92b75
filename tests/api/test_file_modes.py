"""Files at rest: $SERVICE_HOME and its directories are 0700; svc.db (with -wal and -shm), the
credentials file, the pidfile and the log are 0600, whatever the umask, and modes a previous
version (or a user) loosened are narrowed again at start."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from client.config import read_env_file
from daemon.app import PRIVATE_DIRS, create_app
from tests.support.api import make_settings
from tests.support.homes import short_home


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def assert_private(home: Path, expect_log: bool = False) -> None:
    assert mode(home) == 0o700, oct(mode(home))
    for name in ("blobs", "logs", "workspaces", "sandbox-runtime"):
        assert mode(home / name) == 0o700, (name, oct(mode(home / name)))
    for name in ("svc.db", "svc.db-wal", "svc.db-shm", "credentials"):
        assert (home / name).exists(), name
        assert mode(home / name) == 0o600, (name, oct(mode(home / name)))
    if expect_log:
        assert mode(home / "logs" / "svcd.log") == 0o600
        assert mode(home / "svcd.pid") == 0o600


async def test_state_is_private_even_with_a_loose_umask(aiohttp_client, tmp_path):
    old = os.umask(0o022)
    try:
        settings = make_settings(tmp_path / "home")
        client = await aiohttp_client(create_app(settings))
        key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
        response = await client.post("/v1/keys", json={"name": "x"}, headers={"Authorization": f"Bearer {key}"})
        assert response.status == 201
        assert_private(settings.home)
    finally:
        os.umask(old)


async def test_loosened_modes_are_narrowed_again_at_start(aiohttp_client, tmp_path):
    settings = make_settings(tmp_path / "home")
    first = await aiohttp_client(create_app(settings))
    await first.close()
    os.chmod(settings.home, 0o755)
    for name in ("svc.db", "credentials"):
        os.chmod(settings.home / name, 0o644)
    os.chmod(settings.home / "blobs", 0o777)
    unrelated = settings.home / "notes.txt"  # not the daemon's: left as it is
    unrelated.write_text("mine")
    os.chmod(unrelated, 0o644)
    second = await aiohttp_client(create_app(settings))
    response = await second.get("/health")
    assert response.status == 200
    assert_private(settings.home)
    assert mode(unrelated) == 0o644
    assert set(PRIVATE_DIRS) >= {"blobs", "logs", "workspaces", "sandbox-runtime"}


def test_a_real_svcd_keeps_its_home_private():
    home = short_home("svc-modes-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0")
    os.chmod(home, 0o755)
    proc = subprocess.Popen([sys.executable, "-m", "daemon.main"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=lambda: os.umask(0o022))
    try:
        deadline = time.monotonic() + 30
        while not (home / "svcd.sock").exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "svcd did not start"
            time.sleep(0.05)
        assert_private(home, expect_log=True)
        assert mode(home / "svcd.sock") == 0o600
    finally:
        proc.terminate()
        proc.wait(10)
        import shutil

        shutil.rmtree(home, ignore_errors=True)
