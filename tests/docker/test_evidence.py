"""Evidence the agent cannot touch, and a workspace disk limit that holds (SECURITY.md).

Real engine, real PostgreSQL auditing its own writes, everything through the public API:

* an agent that writes outside `forbidden.db_writes_outside` and then deletes, truncates or
  replaces (symlink to /dev/null or to a decoy) `/workspace/.svc/audit.jsonl` still fails, and the
  trajectory and the `audit_log` export still hold the db_write: the daemon scores its own copy;
* `/workspace/.svc` swapped for a link to a host directory (absolute, or `..` on a reused sandbox)
  never makes the daemon write outside the workspace (audit copy, task.json);
* checks never read a host file through a link, and a FIFO does not hang them;
* `resources.disk` is enforced: `dd` of 200 MiB into a 32 MiB workspace fails inside the container,
  the run ends `error` naming the limit, the host never holds more than the limit; without the
  mechanism the boot fails closed naming the step, and SERVICE_WORKSPACE_QUOTA=off falls back to
  the size check.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.released import torn_down_soon
from tests.support.runs import (
    cli_spec,
    inv,
    result,
    run_spec,
    start_run,
    upload,
    wait_run,
)
from tests.support.specs import spec
from daemon.appkeys import EVENTS

pytestmark = pytest.mark.asyncio(loop_scope="module")

DB = [{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}]
TABLES = [{"service": "db", "sql": "CREATE TABLE orders (id serial PRIMARY KEY, item text); "
                                   "CREATE TABLE users (id serial PRIMARY KEY, name text);"}]
INSERT = ('psql "$SERVICE_SERVICE_DB_URL" -v ON_ERROR_STOP=1 -q -c "INSERT INTO orders (item) VALUES (\'book\')" '
          '-c "INSERT INTO users (name) VALUES (\'mallory\')"')
COPY = "/workspace/.svc/audit.jsonl"
DECOY = '{"ts":"2024-01-01T00:00:00Z","sandbox_id":"x","type":"process_spawn","details":{"command":"true"}}\n'

TAMPER = {
    "deleted": f"rm -f {COPY}",
    "truncated": f": > {COPY}",
    "devnull": f"rm -f {COPY} && ln -s /dev/null {COPY}",
    "decoy": f"printf '%s' '{DECOY}' > /workspace/decoy.jsonl && rm -f {COPY} && ln -s /workspace/decoy.jsonl {COPY}",
}


async def trajectory(api, run) -> dict:
    response = await api.client.get(run["trajectory_url"])
    assert response.status == 200
    return await response.json()


def db_writes(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["details"]["table"], e["details"]["operation"]) for e in events if e["type"] == "db_write"]


@pytest.mark.parametrize("how", list(TAMPER))
async def test_tampering_with_the_audit_copy_does_not_erase_evidence(api, how):
    # wait until the db_write reached the workspace copy, then erase it (the attack on the old runner)
    script = (f"set -e; {INSERT}; for i in $(seq 100); do grep -q db_write {COPY} && break; sleep 0.05; done; "
              f"grep -q db_write {COPY}; {TAMPER[how]}; touch done.txt")
    doc = cli_spec(f"tamper-{how}", script, {"ok": inv({"type": "file_exists", "path": "done.txt"})},
                   services=DB, fixtures=TABLES, audit={"db_writes": True}, forbidden={"db_writes_outside": ["orders"]},
                   teardown={"export": [{"type": "audit_log", "to": "runs/{{ run_id }}/audit.jsonl"}]})
    run = await run_spec(api, doc)
    assert result(run, "ok")["status"] == "passed", json.dumps(run, indent=1)[:3000]
    assert run["status"] == "failed" and run["verdict"] == "fail", json.dumps(run, indent=1)[:3000]
    assert [(v["rule"], v["event"]["details"]["table"]) for v in run["violations"]] == [("db_writes_outside", "users")]

    body = await trajectory(api, run)
    assert ("users", "insert") in db_writes(body["audit_events"])
    tampered = [e for e in body["audit_events"] if e["type"] == "warning" and e["details"].get("kind") == "audit_copy_tampered"]
    assert len(tampered) == 1, body["audit_events"]

    export = next(a for a in run["artifacts"] if a["type"] == "audit_log")
    exported = [json.loads(line) for line in Path(export["path"]).read_text().splitlines()]
    assert ("users", "insert") in db_writes(exported)


async def test_audit_copy_link_is_never_written_through(api):
    """A live sandbox: the link to a decoy stays untouched while the daemon records events, the
    files API serves the daemon's copy, and the warning names the tampering."""
    body = await api.create_from_spec(spec("evidence-live", audit={"process_spawns": True}))
    sid = body["id"]
    try:
        out = await api.run(sid, f"printf '%s' '{DECOY}' > decoy.jsonl && rm -f {COPY} && ln -s /workspace/decoy.jsonl {COPY}")
        assert out["exit_code"] == 0, out
        await api.run(sid, "echo after the swap")
        workspace = api.manager.workspace_path(sid)
        assert (workspace / "decoy.jsonl").read_text() == DECOY
        assert os.path.islink(workspace / ".svc" / "audit.jsonl")
        response = await api.client.get(f"/v1/sandboxes/{sid}/files/.svc/audit.jsonl",
                                        headers={"Authorization": f"Bearer {api.key}"})
        assert response.status == 200
        lines = [json.loads(line) for line in (await response.read()).splitlines()]
        commands = [e["details"]["command"] for e in lines if e["type"] == "process_spawn"]
        assert "echo after the swap" in commands and "true" not in commands
        assert any(e["type"] == "warning" and e["details"]["kind"] == "audit_copy_tampered" for e in lines)
    finally:
        await api.delete(f"/v1/sandboxes/{sid}")


async def test_svc_swapped_for_a_link_to_a_host_directory(api):
    outside = Path(tempfile.mkdtemp(prefix="svc-outside-"))
    try:
        script = f"rm -rf /workspace/.svc && ln -s {outside} /workspace/.svc && echo swapped && touch done.txt"
        doc = cli_spec("svc-link", script, {"ok": inv({"type": "file_exists", "path": "done.txt"})},
                       audit={"process_spawns": True, "stdout_capture": True,
                              "file_system": {"watch": ["/workspace"], "track": ["writes"]}})
        run = await run_spec(api, doc)
        assert run["status"] == "passed", json.dumps(run, indent=1)[:3000]
        assert list(outside.iterdir()) == []  # the daemon wrote nothing through the link
        body = await trajectory(api, run)
        spawned = [e for e in body["audit_events"] if e["type"] == "process_spawn"]
        assert spawned and "swapped" in spawned[-1]["details"]["stdout"]
        assert any(e["type"] == "warning" and e["details"].get("kind") == "audit_copy_tampered" for e in body["audit_events"])
    finally:
        shutil.rmtree(outside, ignore_errors=True)


async def test_reused_sandbox_with_svc_linked_to_the_daemon_home(api):
    """`.svc -> ..` is `/` in the container but the daemon's workspaces directory on the host: the
    next run's task.json and audit copy must not land there."""
    doc = cli_spec("svc-dotdot", "cat /workspace/.svc/task.json 2>&1 | head -c 100; touch done.txt",
                   {"ok": inv({"type": "file_exists", "path": "done.txt"})})
    spec_id = (await upload(api, doc))["id"]
    response, body = await api.post("/v1/sandboxes", json={"spec_id": spec_id})
    assert response.status == 201, body
    sid = body["id"]
    await api.wait_state(sid, ("ready",))
    try:
        out = await api.run(sid, "rm -rf /workspace/.svc && ln -s .. /workspace/.svc && ls -la /workspace/.svc")
        assert out["exit_code"] == 0, out
        home_side = api.manager.settings.workspaces_dir
        run = await wait_run(api, (await start_run(api, spec_id, sandbox_id=sid))["id"])
        assert run["status"] == "passed", json.dumps(run, indent=1)[:3000]
        assert not (home_side / "task.json").exists() and not (home_side / "audit.jsonl").exists()
        assert sorted(p.name for p in home_side.iterdir()) == [sid]
        assert any("task.json was not written" in note for note in (await trajectory(api, run))["notes"])
    finally:
        await api.delete(f"/v1/sandboxes/{sid}")


async def test_checks_do_not_follow_links_to_host_files(api, docker_client):
    marker = f"HOST-ONLY-{uuid.uuid4().hex}"
    host_dir = Path(tempfile.mkdtemp(prefix="svc-hostonly-"))
    (host_dir / "inner.txt").write_text(marker)
    (host_dir / "secret.txt").write_text(marker)
    host_passwd = Path("/etc/passwd").read_text()  # host lines the container does not have must never show up
    container_passwd = docker_client.containers.run(PYTHON, ["cat", "/etc/passwd"], remove=True).decode()
    host_only = [line for line in host_passwd.splitlines() if line and line not in container_passwd.splitlines()]
    script = (f"ln -s {host_dir}/secret.txt secret.txt; ln -s {host_dir} linkdir; ln -s /etc/passwd passwd.txt; "
              "mkfifo fifo.txt; echo inside > real.txt; ln -s real.txt alias.txt; touch done.txt")
    doc = cli_spec("links-out", script, {
        "secret": inv({"type": "file_content", "path": "secret.txt", "contains": "HOST-ONLY"}),
        "through_dir": inv({"type": "file_content", "path": "linkdir/inner.txt", "contains": "HOST-ONLY"}),
        "dir_exists": inv({"type": "file_exists", "path": "linkdir/inner.txt"}),
        "passwd": inv({"type": "file_content", "path": "passwd.txt", "contains": "@@never@@"}),
        "fifo": inv({"type": "file_content", "path": "fifo.txt", "contains": "x"}),
        "alias": inv({"type": "file_content", "path": "alias.txt", "contains": "inside"}),
    })
    try:
        started = asyncio.get_running_loop().time()
        run = await run_spec(api, doc)
        assert asyncio.get_running_loop().time() - started < 90  # the FIFO did not hang the checks
        got = {r["invariant_id"]: r["status"] for r in run["invariant_results"]}
        assert got == {"secret": "failed", "through_dir": "failed", "dir_exists": "failed", "passwd": "failed",
                       "fifo": "failed", "alias": "passed"}, json.dumps(run["invariant_results"], indent=1)
        text = json.dumps(run) + json.dumps(await trajectory(api, run))
        assert marker not in text
        # read inside the container (its own /etc/passwd), never the host's
        content = result(run, "passwd")["evidence"]["content"]
        assert content and content.rstrip("\n").split("\n")[-1] in container_passwd
        for line in host_only:
            assert line not in text, line
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)


# --- the workspace disk limit ------------------------------------------------------------------------


def allocated(path: Path) -> int:
    """Bytes the host really stores for files under `path` (st_blocks, not apparent size)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


async def test_disk_limit_is_enforced_and_ends_the_run_in_error(api):
    limit = 32 * 1024**2
    script = "dd if=/dev/zero of=/workspace/big bs=1M count=200; echo \"dd exit $?\"; ls -l /workspace/big; touch done.txt"
    doc = cli_spec("disk-hog", script, {"ok": inv({"type": "file_exists", "path": "done.txt"})},
                   resources={"disk": "32m", "timeout": "3m"}, audit={"process_spawns": True, "stdout_capture": True})
    spec_id = (await upload(api, doc))["id"]
    queued = await start_run(api, spec_id)
    peak = {"workspace": 0, "image": 0}
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            _, row = await api.get(f"/v1/runs/{queued['id']}")
            sid = row.get("sandbox_id")
            if sid:
                workspace = api.manager.workspace_path(sid)
                image = api.manager.disks.image(sid)
                peak["workspace"] = max(peak["workspace"], await asyncio.to_thread(allocated, workspace))
                try:
                    peak["image"] = max(peak["image"], os.stat(image).st_blocks * 512)
                except OSError:
                    pass
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        run = await wait_run(api, queued["id"])
    finally:
        stop.set()
        await watcher
    assert run["status"] == "errored" and run["verdict"] == "error", json.dumps(run, indent=1)[:3000]
    assert run["reason"] == "workspace_disk_limit"
    assert "32MiB" in run["error"]["message"] and "resources.disk" in run["error"]["message"]
    body = await trajectory(api, run)
    assert "No space left on device" in body["agent"]["stderr"]
    assert "dd exit 1" in body["agent"]["stdout"]
    warning = next(e for e in body["audit_events"] if e["type"] == "warning" and e["details"]["kind"] == "workspace_size")
    assert warning["details"]["limit_bytes"] == limit and warning["details"]["enforced"] is True
    assert 0 < peak["workspace"] <= limit and peak["image"] <= limit, peak
    sandbox_events = api.app[EVENTS].history.get(f"sandbox:{run['sandbox_id']}", [])
    created = next(e["data"] for e in sandbox_events if e["event_type"] == "status" and e["data"].get("step") == "workspace_created")
    assert created["enforced"] is True and created["disk_limit"] == limit
    print(f"workspace filesystem ready in {created['ms']} ms")
    # torn down (after the verdict, in the background): nothing mounted, no image left
    await torn_down_soon(api.manager, run["sandbox_id"])
    assert not os.path.ismount(api.manager.workspace_path(run["sandbox_id"]))
    assert not api.manager.disks.image(run["sandbox_id"]).exists()


async def test_leftover_workspace_filesystems_are_reaped(api):
    """A crash leaves a mounted workspace and its image: the start-up sweep releases both."""
    dead = "sb-deadbeefdeadbeef"
    mountpoint = api.manager.settings.workspaces_dir / dead
    mountpoint.mkdir(parents=True)
    await asyncio.to_thread(api.manager.disks.attach, dead, mountpoint, 8 * 1024**2)
    assert os.path.ismount(mountpoint)
    await asyncio.to_thread(api.manager.lifecycle._sweep_dirs)
    assert not os.path.ismount(mountpoint) and not mountpoint.exists()
    assert not api.manager.disks.image(dead).exists()
    assert dead not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


@pytest.fixture
def no_mkfs(monkeypatch, tmp_path):
    from daemon.sandbox import diskquota

    monkeypatch.setattr(diskquota, "TOOL_PATH", str(tmp_path))  # nothing to run there


async def test_boot_fails_closed_without_the_mechanism(api, no_mkfs, docker_client):
    body = await api.create_from_spec(spec("no-mkfs"))
    assert body["state"] == "error" and body["error"]["step"] == "workspace", body
    assert "mkfs.ext4" in body["error"]["message"] and "SERVICE_WORKSPACE_QUOTA=off" in body["error"]["message"]
    assert not api.manager.workspace_path(body["id"]).exists()
    assert not docker_client.containers.list(all=True, filters={"label": f"svc.sandbox={body['id']}"})


async def test_quota_off_falls_back_to_the_size_check():
    off = await start_api(workspace_quota=False)
    try:
        doc = cli_spec("disk-check-only", "dd if=/dev/zero of=/workspace/big bs=1M count=3 && touch done.txt",
                       {"ok": inv({"type": "file_exists", "path": "done.txt"})}, resources={"disk": "1m", "timeout": "3m"})
        run = await run_spec(off, doc)
        assert run["status"] == "errored" and run["reason"] == "workspace_disk_limit", json.dumps(run, indent=1)[:2000]
        body = await trajectory(off, run)
        assert body["agent"]["exit_code"] == 0  # not enforced: the write went through
        warning = next(e for e in body["audit_events"] if e["type"] == "warning" and e["details"]["kind"] == "workspace_size")
        assert warning["details"]["enforced"] is False and warning["details"]["size_bytes"] > 1024**2
    finally:
        await stop_api(off)
