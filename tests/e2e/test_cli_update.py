"""`svc update` and the automatic check, from the real wheel installed in a fresh venv outside the
checkout, against a real PEP 503 index served over HTTP holding a newer (trivial) svc wheel."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.cli import free_port
from tests.support.package_index import PackageIndex, build_trivial_wheel
from tests.support.procs import ROOT
from tests.support.wheels import linked_copy


@pytest.fixture
def venv_dir(installed_svc, tmp_path):
    """The installed svc venv, copied per test so an upgrade does not leak into the next."""
    return linked_copy(installed_svc, tmp_path / "venv")


@pytest.fixture
def index(tmp_path):
    with PackageIndex(tmp_path / "index") as served:
        served.add("svc", build_trivial_wheel(tmp_path / "built", "svc", "99.0.0"))
        yield served


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERVICE_", "PIP_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               SERVICE_HOME=str(tmp_path / "svc-home"), **extra)
    return env


def svc(venv_dir: Path, env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv_dir / "bin" / "svc"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def version_in(venv_dir: Path) -> str:
    return subprocess.run([str(venv_dir / "bin" / "python"), "-c", "from importlib.metadata import version; print(version('svc'))"],
                          capture_output=True, text=True, check=True, cwd="/").stdout.strip()


def state(tmp_path: Path) -> dict:
    path = tmp_path / "cache" / "svc" / "update-check.json"
    return json.loads(path.read_text()) if path.exists() else {}


def wait_for_latest(tmp_path: Path) -> dict:
    deadline = time.monotonic() + 60
    while "latest" not in state(tmp_path):
        assert time.monotonic() < deadline, "the detached check wrote nothing"
        time.sleep(0.1)
    return state(tmp_path)


def test_update_installs_the_newer_version_from_the_index(venv_dir, index, tmp_path):
    result = svc(venv_dir, env_for(tmp_path, SERVICE_UPDATE_INDEX=index.url), "update", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert version_in(venv_dir) == "99.0.0"


def test_update_says_up_to_date_when_nothing_is_newer(venv_dir, tmp_path):
    with PackageIndex(tmp_path / "old-index") as old:
        old.add("svc", build_trivial_wheel(tmp_path / "built", "svc", "0.0.1"))
        result = svc(venv_dir, env_for(tmp_path, SERVICE_UPDATE_INDEX=old.url), "update", cwd=tmp_path)
    assert result.returncode == 0 and "is up to date" in result.stderr and version_in(venv_dir) != "0.0.1"


def test_update_names_an_unreachable_index_on_one_line(venv_dir, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/simple/"
    result = svc(venv_dir, env_for(tmp_path, SERVICE_UPDATE_INDEX=url), "update", cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.startswith(f"svc: cannot read the package index {url}") and result.stderr.count("\n") == 1


def test_the_automatic_check_announces_a_newer_version_on_the_next_command(venv_dir, index, tmp_path):
    env = env_for(tmp_path, SERVICE_UPDATE_INDEX=index.url)
    svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
    assert wait_for_latest(tmp_path)["latest"] == "99.0.0"
    later = svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
    assert "svc 99.0.0 is available (installed: 0.1.0); run `svc update`" in later.stderr


def test_the_automatic_check_runs_at_most_once_a_day(venv_dir, index, tmp_path):
    env = env_for(tmp_path, SERVICE_UPDATE_INDEX=index.url)
    svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
    first = wait_for_latest(tmp_path)["checked_at"]
    svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
    assert state(tmp_path)["checked_at"] == first


def test_the_automatic_check_is_silent_when_the_index_is_unreachable(venv_dir, tmp_path):
    env = env_for(tmp_path, SERVICE_UPDATE_INDEX=f"http://127.0.0.1:{free_port()}/simple/")
    first = svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
    second = svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
    assert (first.stderr, second.stderr) == ("", "")


def test_no_automatic_check_with_service_no_auto_update(venv_dir, index, tmp_path):
    svc(venv_dir, env_for(tmp_path, SERVICE_UPDATE_INDEX=index.url, SERVICE_NO_AUTO_UPDATE="1"), "completion", "bash", cwd=tmp_path)
    assert state(tmp_path) == {}


def test_no_automatic_check_from_a_checkout(index, tmp_path):
    env = env_for(tmp_path, SERVICE_UPDATE_INDEX=index.url)
    subprocess.run([os.sys.executable, "-m", "client.cli", "completion", "bash"], env=env, cwd=ROOT, capture_output=True, timeout=60)
    assert state(tmp_path) == {}


def test_update_refuses_to_run_from_a_checkout(index, tmp_path):
    env = env_for(tmp_path, SERVICE_UPDATE_INDEX=index.url)
    result = subprocess.run([os.sys.executable, "-m", "client.cli", "update"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "runs from a checkout" in result.stderr


def test_a_token_in_the_index_url_is_never_printed(venv_dir, tmp_path):
    url = f"http://user:s3cr3t-token@127.0.0.1:{free_port()}/simple/"
    result = svc(venv_dir, env_for(tmp_path, SERVICE_UPDATE_INDEX=url), "update", cwd=tmp_path)
    assert result.returncode == 1 and "s3cr3t-token" not in result.stderr and "***@127.0.0.1" in result.stderr


def test_svc_update_itself_starts_no_automatic_check(venv_dir, tmp_path):
    with PackageIndex(tmp_path / "old-index") as old:
        old.add("svc", build_trivial_wheel(tmp_path / "built", "svc", "0.0.1"))
        svc(venv_dir, env_for(tmp_path, SERVICE_UPDATE_INDEX=old.url), "update", cwd=tmp_path)
    assert "checked_at" not in state(tmp_path)


def test_update_without_a_configured_index_names_the_setting(venv_dir, tmp_path):
    result = svc(venv_dir, env_for(tmp_path), "update", cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.startswith("svc: no package index configured: set SERVICE_UPDATE_INDEX")


def test_no_automatic_check_without_a_configured_index(venv_dir, tmp_path):
    svc(venv_dir, env_for(tmp_path), "completion", "bash", cwd=tmp_path)
    assert state(tmp_path) == {}


def test_update_uses_the_index_saved_by_configure(venv_dir, index, tmp_path):
    env = env_for(tmp_path)
    saved = svc(venv_dir, env, "configure", "--update-index", index.url, cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    result = svc(venv_dir, env, "update", cwd=tmp_path)
    assert (result.returncode, version_in(venv_dir)) == (0, "99.0.0"), result.stderr


def test_configure_never_prints_an_index_token(venv_dir, tmp_path):
    url = "https://user:s3cr3t-token@packages.example/simple/"
    result = svc(venv_dir, env_for(tmp_path), "configure", "--update-index", url, cwd=tmp_path)
    assert result.returncode == 0 and "s3cr3t-token" not in result.stdout + result.stderr


def test_update_force_reinstalls_the_index_release_even_when_it_is_not_newer(venv_dir, tmp_path):
    current = version_in(venv_dir)
    with PackageIndex(tmp_path / "same-index") as same:
        same.add("svc", build_trivial_wheel(tmp_path / "built", "svc", current, module_text="REINSTALLED = True\n"))
        env = env_for(tmp_path, SERVICE_UPDATE_INDEX=same.url)
        plain = svc(venv_dir, env, "update", cwd=tmp_path)
        forced = svc(venv_dir, env, "update", "--force", cwd=tmp_path)
    assert (plain.returncode, "is up to date" in plain.stderr, forced.returncode) == (0, True, 0), forced.stderr
    reinstalled = subprocess.run([str(venv_dir / "bin" / "python"), "-c", "import svc_release; print(svc_release.REINSTALLED)"],
                                 capture_output=True, text=True, cwd="/")
    assert reinstalled.stdout.strip() == "True"


def test_the_automatic_check_gives_up_on_an_index_that_never_answers(venv_dir, tmp_path):
    """The index accepts the connection and says nothing: the detached check closes it on its own
    (its timeout) and records no release."""
    closed = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(60)

        def silent() -> None:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(60)
                while conn.recv(4096):  # read the request, answer nothing, until the client hangs up
                    pass
            closed.set()

        thread = threading.Thread(target=silent, daemon=True)
        thread.start()
        env = env_for(tmp_path, SERVICE_UPDATE_INDEX=f"http://127.0.0.1:{server.getsockname()[1]}/simple/")
        command = svc(venv_dir, env, "completion", "bash", cwd=tmp_path)
        assert command.returncode == 0 and closed.wait(60)
    assert "latest" not in state(tmp_path)
