"""The daemon's side of the workspace: nothing opened through a link, no FIFO or device opened,
walks that never leave the tree, and the audit log whose authoritative copy the agent cannot touch
(tests/docker/test_evidence.py does the same against real sandboxes)."""
from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from daemon.sandbox import workspace as ws
from daemon.sandbox.audit import AuditLog
from daemon.sandbox.diskquota import Usage, _unescape, full_margin
from daemon.sandbox.fswatch import WorkspaceWatcher


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    (root / "real.txt").write_text("inside")
    return root, outside


def test_open_under_refuses_links_fifos_and_devices(tree):
    root, outside = tree
    os.symlink(outside / "secret.txt", root / "leaf.txt")
    os.symlink(outside, root / "dir")
    os.mkfifo(root / "fifo")
    assert ws.read_file(str(root), "real.txt") == b"inside"
    with pytest.raises(ws.SymlinkError):
        ws.read_file(str(root), "leaf.txt")
    with pytest.raises(ws.SymlinkError):
        ws.read_file(str(root), "dir/secret.txt")
    with pytest.raises(ws.NotRegularFile):  # returns at once: a FIFO is never opened
        ws.read_file(str(root), "fifo")
    with pytest.raises(ws.NotRegularFile):
        ws.open_under(str(root), "fifo", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.mknod(root / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pass
    else:
        with pytest.raises(ws.NotRegularFile):
            ws.read_file(str(root), "null")
    with pytest.raises(ws.FileMissing):
        ws.read_file(str(root), "nothing.txt")


def test_writes_never_go_through_a_link(tree):
    root, outside = tree
    os.symlink(outside / "secret.txt", root / "leaf.txt")
    os.symlink(outside, root / ".svc")
    with pytest.raises(ws.SymlinkError):
        ws.write_file(str(root), "leaf.txt", b"overwritten")
    with pytest.raises(ws.SymlinkError):
        ws.write_file(str(root), ".svc/task.json", b"{}")
    with pytest.raises(ws.SymlinkError):
        ws.replace_file(str(root), ".svc/task.json", b"{}")
    assert (outside / "secret.txt").read_text() == "host secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    # a link at the file itself is replaced, not followed
    ws.replace_file(str(root), "leaf.txt", b"mine")
    assert not os.path.islink(root / "leaf.txt") and (root / "leaf.txt").read_bytes() == b"mine"
    assert (outside / "secret.txt").read_text() == "host secret"
    # missing directories are made (real ones)
    ws.write_file(str(root), "a/b/c.txt", b"deep")
    assert (root / "a" / "b" / "c.txt").read_bytes() == b"deep"


def test_lstat_and_is_dir(tree):
    root, outside = tree
    os.symlink(outside, root / "dir")
    assert ws.lstat(str(root), "real.txt").st_size == 6
    assert stat.S_ISLNK(ws.lstat(str(root), "dir").st_mode)
    assert ws.lstat(str(root), "nothing") is None
    with pytest.raises(ws.SymlinkError):
        ws.lstat(str(root), "dir/secret.txt")
    assert not ws.is_dir(str(root), "dir") and not ws.is_dir(str(root), "dir/x")


def test_walks_do_not_leave_the_tree(tree):
    root, outside = tree
    os.symlink(outside, root / "dir")
    os.mkfifo(root / "fifo")
    (root / ".svc").mkdir()
    (root / ".svc" / "audit.jsonl").write_text("x")
    (root / "sub").mkdir()
    (root / "sub" / "f.txt").write_text("12345")
    files = {e["path"]: e for e in ws.manifest(str(root))}
    assert set(files) == {"dir", "real.txt", "sub/f.txt"}  # the link is listed, not followed; no FIFO
    assert files["dir"]["type"] == "symlink"
    assert ws.disk_usage(str(root)) == 6 + 5 + 1  # .svc counts, the link's target does not


def test_walk_refuses_absurd_depth(tmp_path, monkeypatch):
    monkeypatch.setattr(ws, "MAX_DEPTH", 4)
    deep = tmp_path / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    with pytest.raises(ws.PathError):
        ws.manifest(str(tmp_path))


def make_log(tmp_path, root):
    published = []
    log = AuditLog("sb-test", tmp_path / "evidence" / "sb-test" / "audit.jsonl", published.append, lambda: ["s3cr3t-value"],
                   workspace=root)
    return log, published


def test_audit_log_slices_by_sequence_and_survives_the_copy_being_erased(tmp_path, tree):
    root, outside = tree
    (root / ".svc").mkdir()
    log, published = make_log(tmp_path, root)
    log.record("process_spawn", {"command": "setup"})
    mark = log.mark()
    log.record("db_write", {"table": "users", "operation": "insert", "token": "s3cr3t-value"})
    (root / ".svc" / "audit.jsonl").unlink()  # the agent erases its trail
    log.record("process_spawn", {"command": "after"})
    events = log.events(mark)
    assert [e["type"] for e in events] == ["db_write", "process_spawn", "warning"]
    assert events[0]["details"]["token"] == "***"
    assert events[2]["details"]["kind"] == "audit_copy_tampered"
    assert [e["type"] for e in log.events()] == ["process_spawn", "db_write", "process_spawn", "warning"]
    assert len(published) == 4
    # the copy starts again with what came after; the evidence file is whole
    copy = [json.loads(line)["type"] for line in (root / ".svc" / "audit.jsonl").read_text().splitlines()]
    assert copy == ["process_spawn", "warning"]
    assert len(log.raw().splitlines()) == 4
    assert oct(os.stat(log.path.parent).st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("how", ["truncate", "symlink_file", "symlink_dir", "fifo"])
def test_audit_copy_tampering_is_contained(tmp_path, tree, how):
    root, outside = tree
    (root / ".svc").mkdir()
    log, _ = make_log(tmp_path, root)
    log.record("db_write", {"table": "users"})
    copy = root / ".svc" / "audit.jsonl"
    if how == "truncate":
        copy.write_text("")
    elif how == "symlink_file":
        copy.unlink()
        os.symlink(outside / "secret.txt", copy)
    elif how == "symlink_dir":
        for p in (root / ".svc").iterdir():
            p.unlink()
        (root / ".svc").rmdir()
        os.symlink(outside, root / ".svc")
    else:
        copy.unlink()
        os.mkfifo(copy)
    log.record("process_spawn", {"command": "next"})  # returns at once, never raises
    assert [e["type"] for e in log.events()] == ["db_write", "process_spawn", "warning"]
    assert (outside / "secret.txt").read_text() == "host secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_evidence_write_failure_is_counted(tmp_path, tree):
    root, _ = tree
    blocker = tmp_path / "evidence"
    blocker.write_text("not a directory")
    log, _ = make_log(tmp_path, root)
    log.record("db_write", {"table": "users"})
    assert log.lost == 1 and log.error and log.events() == []


async def test_watcher_does_not_follow_a_linked_directory(tree):
    root, outside = tree
    events = []
    os.symlink(outside, root / "link")
    watcher = WorkspaceWatcher(root, ["/workspace"], ["writes", "reads"], events.append)
    watcher.start()
    try:
        (outside / "new.txt").write_text("host side")
        (outside / "secret.txt").read_text()
        (root / "mine.txt").write_text("ok")
        await asyncio.sleep(0.05)
        watcher.drain()
    finally:
        watcher.stop()
    assert [e["path"] for e in events] == ["/workspace/mine.txt"]


def test_disk_usage_helpers():
    assert full_margin(32 * 1024**2) == 1024**2 and full_margin(2 * 1024**3) == 8 * 1024**2
    assert Usage(total=32 * 1024**2, used=31 * 1024**2, available=600 * 1024).full
    assert not Usage(total=32 * 1024**2, used=10 * 1024**2, available=20 * 1024**2).full
    assert _unescape(r"/tmp/a\040b") == "/tmp/a b"


def test_evidence_has_a_cap(tmp_path, tree, monkeypatch):
    root, _ = tree
    log, _ = make_log(tmp_path, root)
    monkeypatch.setattr(log, "MAX_BYTES", 300)
    for i in range(5):
        log.record("process_spawn", {"command": f"c{i}"})
    kept = log.events()
    assert 0 < len(kept) < 5 and log.lost == 5 - len(kept) and "cap" in log.error
