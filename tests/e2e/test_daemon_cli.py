"""The real svcd, started by the CLI, answering over its Unix socket, stopped by the CLI."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

from tests.support.cli import free_port
from tests.support.procs import ROOT, cli_env, run_svc

SPEC = ROOT / "examples" / "quickstart.yaml"


def test_cli_autostarts_daemon_uploads_and_reads_back_a_spec(home):
    result = run_svc(home, "specs", "upload", str(SPEC))
    assert result.returncode == 0, result.stderr
    assert "starting the daemon" in result.stderr
    record = json.loads(result.stdout)
    assert record["version"] == 1
    sock = home / "svcd.sock"
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home / "credentials").st_mode) == 0o600

    got = run_svc(home, "specs", "get", record["id"], "--yaml")
    assert got.returncode == 0 and got.stdout == SPEC.read_text()
    status = run_svc(home, "daemon", "status")
    assert status.returncode == 0 and json.loads(status.stdout)["health"]["status"] == "ok"

    stopped = run_svc(home, "daemon", "stop")
    assert "stopped" in stopped.stderr
    assert not sock.exists()
    assert run_svc(home, "daemon", "status").returncode == 1


def test_daemon_refuses_to_start_twice_and_replaces_a_stale_socket(home):
    assert run_svc(home, "daemon", "start").returncode == 0
    pid = int((home / "svcd.pid").read_text())
    second = subprocess.run([sys.executable, "-m", "daemon.main"], env=cli_env(home), capture_output=True, text=True, timeout=30)
    assert second.returncode == 1 and "already running" in second.stderr
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    assert (home / "svcd.sock").exists()  # stale socket left behind by the killed daemon
    again = run_svc(home, "specs", "list")
    assert again.returncode == 0, again.stderr
    assert int((home / "svcd.pid").read_text()) != pid


def test_a_running_daemon_on_another_socket_is_not_started_again(home):
    assert run_svc(home, "daemon", "start").returncode == 0
    pid = int((home / "svcd.pid").read_text())
    elsewhere = run_svc(home, "--base-url", f"unix://{home}/other.sock", "eval", "list")
    assert (elsewhere.returncode, "starting the daemon" in elsewhere.stderr) == (1, False)
    assert int((home / "svcd.pid").read_text()) == pid and "cannot reach svcd" in elsewhere.stderr


def test_daemon_start_with_an_http_base_url_reports_the_started_daemon(home):
    port = free_port()
    started = run_svc(home, "--base-url", f"http://127.0.0.1:{port}", "daemon", "start", SERVICE_PORT=str(port))
    try:
        assert (started.returncode, started.stderr.count("did not answer")) == (0, 0), started.stderr
    finally:
        run_svc(home, "daemon", "stop")


def test_sigkill_loses_nothing_acknowledged(home):
    uploads = []
    for i in range(5):
        spec = SPEC.read_text().replace("id: quickstart", f"id: quick-{i}")
        path = home / f"s{i}.yaml"
        path.write_text(spec)
        result = run_svc(home, "specs", "upload", str(path))
        assert result.returncode == 0, result.stderr
        uploads.append(json.loads(result.stdout)["id"])
    os.kill(int((home / "svcd.pid").read_text()), signal.SIGKILL)
    time.sleep(0.2)
    listing = run_svc(home, "specs", "list")
    assert listing.returncode == 0, listing.stderr
    assert set(uploads) <= {s["id"] for s in json.loads(listing.stdout)["items"]}


def test_spec_validate_is_offline_and_names_the_line(home):
    ok = run_svc(home, "spec", "validate", str(SPEC))
    assert ok.returncode == 0 and "ok" in ok.stderr
    bad = run_svc(home, "spec", "validate", str(ROOT / "examples" / "broken.yaml"))
    assert bad.returncode == 1
    assert "broken.yaml:" in bad.stderr and "comand_exit" in bad.stderr
    assert not (home / "svcd.sock").exists(), "validate must not start the daemon"


def test_bad_key_and_unreachable_daemon_exit_1(home):
    assert run_svc(home, "daemon", "start").returncode == 0
    bad = run_svc(home, "--api-key", "svc_live_wrongwrongwrongwrongwrongwrong00", "specs", "list")
    assert bad.returncode == 1 and "401 unauthorized" in bad.stderr
    gone = run_svc(home, "--base-url", "http://127.0.0.1:9", "specs", "list")
    assert gone.returncode == 1 and "cannot reach svcd" in gone.stderr


def test_version_flag():
    result = subprocess.run([sys.executable, "-m", "client.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("svc ")
