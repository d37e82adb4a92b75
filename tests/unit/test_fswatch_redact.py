"""The workspace watcher (real inotify on a temporary directory) and secret redaction."""
from __future__ import annotations

import asyncio
import base64
import os

from daemon.sandbox.fswatch import WorkspaceWatcher, watch_prefixes
from daemon.sandbox.redact import RawCapture, chunks, redact_text, redact_value


def test_watch_prefixes():
    assert watch_prefixes(["/workspace", "out", "/workspace/a/../b", "/etc"]) == (["", "out", "b"], ["/etc"])


async def test_watcher_reports_writes_deletes_reads_and_skips_svc(tmp_path):
    (tmp_path / ".svc").mkdir()
    events, warnings = [], []
    watcher = WorkspaceWatcher(tmp_path, ["/workspace/out", "/tmp"], ["writes", "deletes", "reads"], events.append,
                               warnings.append)
    watcher.start()
    try:
        os.makedirs(tmp_path / "out" / "deep")
        (tmp_path / "out" / "deep" / "early.txt").write_text("ab")
        await asyncio.sleep(0.05)
        watcher.drain()
        (tmp_path / "out" / "a.txt").write_text("hello")
        (tmp_path / "elsewhere.txt").write_text("x")
        (tmp_path / ".svc" / "audit.jsonl").write_text("x")
        watcher.drain()
        (tmp_path / "out" / "a.txt").read_text()
        watcher.drain()
        with open(tmp_path / "out" / "a.txt", "a") as fh:
            fh.write("!")
        watcher.drain()
        os.unlink(tmp_path / "out" / "a.txt")
        watcher.drain()
    finally:
        watcher.stop()
    got = [(e["path"], e["operation"], e["size"]) for e in events]
    assert ("/workspace/out/deep/early.txt", "create", 2) in got
    rest = [g for g in got if g[0] == "/workspace/out/a.txt"]
    assert rest == [("/workspace/out/a.txt", "create", 5), ("/workspace/out/a.txt", "read", 5),
                    ("/workspace/out/a.txt", "modify", 6), ("/workspace/out/a.txt", "delete", None)]
    assert not [g for g in got if "elsewhere" in g[0] or ".svc" in g[0]]
    assert warnings and warnings[0]["path"] == "/tmp"


async def test_watcher_tracks_only_what_is_asked(tmp_path):
    events = []
    watcher = WorkspaceWatcher(tmp_path, ["/workspace"], ["deletes"], events.append)
    watcher.start()
    try:
        (tmp_path / "f").write_text("1")
        (tmp_path / "f").read_text()
        os.unlink(tmp_path / "f")
        watcher.drain()
    finally:
        watcher.stop()
    assert [(e["path"], e["operation"]) for e in events] == [("/workspace/f", "delete")]


def test_redaction_catches_encodings():
    secret = "sk-live-0123456789abcdef"
    text = (f"a {secret} b {base64.b64encode(('Bearer ' + secret + chr(10)).encode()).decode()} "
            f"c {secret.replace('-', '%2D')} d")
    out = redact_text(text, [secret])
    assert secret not in out and "***" in out
    for k in range(3):
        enc = base64.b64encode(b"x" * k + secret.encode()).decode()
        assert enc[8:24] not in redact_text(enc, [secret])
    assert redact_value({"a": [secret, 1], "b": {"c": f"x{secret}"}}, [secret]) == {"a": ["***", 1], "b": {"c": "x***"}}
    assert redact_text("short abc", ["abc"]) == "short abc"  # too short to redact safely


def test_chunks_split_on_utf8_boundaries():
    text = "é" * 3000  # 6000 bytes
    pieces = chunks(text)
    assert "".join(pieces) == text and all(len(p.encode()) <= 4096 for p in pieces) and len(pieces) == 2


def test_raw_capture_is_private(tmp_path):
    cap = RawCapture(tmp_path / "raw")
    cap.append("echo", "x" * 5000)
    entries = cap.read()
    assert [len(e["data"]) for e in entries] == [4096, 904] and cap.text() == "x" * 5000
    assert oct(os.stat(cap.path).st_mode & 0o777) == "0o600"
