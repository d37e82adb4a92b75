"""Watch mode: a change to the spec (or a file it references) starts a new run once, debounced; a run
made stale by the change is cancelled; nothing runs again without a change. Against a real daemon
with real sandboxes, through the engine, the TUI's watch screen and the `svc watch` CLI."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.support.images import PYTHON
from tests.support.specs import FROM_SOURCE_SPEC
from tests.support.tui import eventually, make_app, screen_text, wait_for
from tui.screens.watch import WatchScreen
from tui.watch import ApiLauncher, WatchEngine

SLOW = f"""\
version: 1
id: watched
base: {PYTHON}
task:
  prompt: "{{prompt}}"
agent:
  type: cli
  binary: sh
  args: ["-c", "sleep {{sleep}}; echo hi > hello.txt"]
secrets:
  TOKEN: "file:token.txt"
invariants:
  wrote:
    check:
      type: file_exists
      path: hello.txt
"""


def write_spec(path: Path, prompt: str, sleep: int = 30) -> None:
    path.write_text(SLOW.format(prompt=prompt, sleep=sleep))


def kinds(engine: WatchEngine) -> list[str]:
    return [e.kind for e in engine.events if e.kind not in ("progress", "watching")]


class FakeLauncher:
    """Counts starts and cancels; every run stays running until cancelled."""

    def __init__(self):
        self.started: list[str] = []
        self.cancelled: list[str] = []

    async def start(self, spec: Path) -> str:
        self.started.append(f"exp-{len(self.started) + 1}")
        return self.started[-1]

    async def status(self, experiment_id: str):
        from tui.data import ExperimentDetail

        return ExperimentDetail.parse({"id": experiment_id, "status": "running", "scenarios": []}, experiment_id)

    async def cancel(self, experiment_id: str) -> None:
        self.cancelled.append(experiment_id)


async def test_a_burst_of_saves_is_one_change_and_quiet_means_no_run(tmp_path):
    spec = tmp_path / "spec.yaml"
    write_spec(spec, "v0")
    (tmp_path / "token.txt").write_text("t0")
    (tmp_path / "unrelated.txt").write_text("x")
    launcher = FakeLauncher()
    engine = WatchEngine(spec, launcher, debounce_ms=300, poll_s=0.05)
    task = asyncio.create_task(engine.run())
    try:
        await eventually(lambda: _true(launcher.started == ["exp-1"]), timeout=5)
        await asyncio.sleep(0.5)  # let watchfiles settle
        for i in range(5):  # an editor saving five times in quick succession
            write_spec(spec, f"v{i + 1}")
            await asyncio.sleep(0.04)
        await eventually(lambda: _true(len(launcher.started) == 2), timeout=10)
        await asyncio.sleep(1.5)
        assert launcher.started == ["exp-1", "exp-2"]  # one rerun for the whole burst
        assert launcher.cancelled == ["exp-1"]  # the stale run was cancelled
        (tmp_path / "unrelated.txt").write_text("y")  # not referenced by the spec: ignored
        await asyncio.sleep(1.2)
        assert len(launcher.started) == 2
        (tmp_path / "token.txt").write_text("t1")  # a referenced file (secret source) counts
        await eventually(lambda: _true(len(launcher.started) == 3), timeout=10)
        assert launcher.cancelled == ["exp-1", "exp-2"]
    finally:
        engine.stop()
        await asyncio.wait_for(task, 10)
    assert launcher.cancelled[-1] == "exp-3"  # stopping cancels the run in flight


async def _true(value):
    return value


def test_referenced_paths_cover_fixtures_sql_files_agent_source_and_secret_files(tmp_path):
    from tui.spec_file import SpecFile

    (tmp_path / "agent").mkdir()
    (tmp_path / "spec.yaml").write_text(
        "id: x\nagent: {type: snapshot, snapshot: mine, source: ./agent}\nfixtures:\n  - {path: data/seed.json, to: /workspace/seed.json}\n"
        "  - {service: db, path: sql/schema.sql}\n  - {service: db, sql: 'select 1'}\nsecrets: {A: env, B: 'file:~/nope', C: 'file:tok'}\n")
    paths = SpecFile.read(tmp_path / "spec.yaml").referenced_paths()
    assert tmp_path.resolve() / "agent" in paths
    assert (tmp_path / "data" / "seed.json").resolve() in paths and (tmp_path / "sql" / "schema.sql").resolve() in paths
    assert (tmp_path / "tok").resolve() in paths and Path("~/nope").expanduser().resolve() in paths


@pytest.mark.docker
async def test_watch_reruns_on_change_and_cancels_the_stale_run(daemon, api, stock_images, tmp_path):
    spec = tmp_path / "watched.yaml"
    write_spec(spec, "first")
    (tmp_path / "token.txt").write_text("secret-1")
    engine = WatchEngine(spec, ApiLauncher(api), debounce_ms=200, poll_s=0.3)
    task = asyncio.create_task(engine.run())
    try:
        await eventually(lambda: _true(len(engine.runs) == 1), timeout=30)
        first = engine.runs[0]
        await eventually(lambda: _status_is(api, first, "running"), timeout=30)
        await asyncio.sleep(0.3)
        write_spec(spec, "second")  # the run in flight is now stale
        await eventually(lambda: _true(len(engine.runs) == 2), timeout=30)
        assert engine.cancelled == [first]
        assert await eventually(lambda: _status_is(api, first, "cancelled"), timeout=30)
        second = engine.runs[1]
        assert (await api.get(f"/v1/experiments/{second}"))["spec_version"] == 2
        await asyncio.sleep(2.0)  # no change, no run
        assert len(engine.runs) == 2 and kinds(engine).count("started") == 2
        assert kinds(engine)[:4] == ["started", "change", "cancelled", "started"]
    finally:
        engine.stop()
        await asyncio.wait_for(task, 30)
    assert await eventually(lambda: _status_is(api, engine.runs[-1], "cancelled"), timeout=30)


async def _status_is(api, experiment_id: str, status: str) -> bool:
    return (await api.get(f"/v1/experiments/{experiment_id}"))["status"] == status


@pytest.mark.docker
async def test_watch_screen_in_the_tui(daemon, api, stock_images, tmp_path):
    spec = tmp_path / "watched.yaml"
    write_spec(spec, "first", sleep=1)
    (tmp_path / "token.txt").write_text("secret-1")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        engine = app.start_watch(spec)
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, WatchScreen) else None, what="the watch screen")
        await wait_for(pilot, lambda: any(e.kind == "finished" for e in engine.events), timeout=20, what=f"the first run {engine.events}")
        assert "watching watched.yaml" in screen_text(app) and "finished" in screen_text(app)
        write_spec(spec, "second", sleep=1)
        await wait_for(pilot, lambda: len(engine.runs) == 2, timeout=30, what="the rerun")
        await wait_for(pilot, lambda: "changed: " in screen_text(app), what="the change in the log")
        assert engine.cancelled == []  # the first run had finished: nothing stale to cancel
        await pilot.press("o")  # open the latest run
        await wait_for(pilot, lambda: getattr(app.screen, "experiment_id", None) == engine.runs[-1], what="the experiment")
        assert screen is not None


@pytest.mark.docker
async def test_svc_watch_cli(daemon, stock_images, tmp_path):
    spec = tmp_path / "watched.yaml"
    write_spec(spec, "first")
    (tmp_path / "token.txt").write_text("secret-1")
    env = dict(os.environ, SERVICE_BASE_URL=f"unix://{daemon.socket_path}", SERVICE_API_KEY=daemon.key,
               SERVICE_NO_AUTOSTART="1", SERVICE_HOME=str(daemon.home))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "client.cli", "watch", str(spec), "--json", "--debounce", "200",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=str(tmp_path))
    events: list[dict] = []

    async def until(kind: str, count: int) -> None:
        deadline = time.monotonic() + 60
        while sum(e["kind"] == kind for e in events) < count:
            line = await asyncio.wait_for(proc.stdout.readline(), max(0.1, deadline - time.monotonic()))
            assert line, (await proc.stderr.read()).decode()
            events.append(json.loads(line))

    try:
        await until("started", 1)
        await asyncio.sleep(0.5)
        write_spec(spec, "second")
        await until("started", 2)
        assert [e["kind"] for e in events if e["kind"] in ("started", "change", "cancelled")] == ["started", "change", "cancelled", "started"]
    finally:
        proc.send_signal(2)  # ctrl-c: stops and cancels the run in flight
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0
    tail = (await proc.stdout.read()).decode().splitlines()
    assert any(json.loads(line)["kind"] == "cancelled" for line in tail if line.strip())


WITH_FILES = f"""\
version: 1
id: watched-files
base: {PYTHON}
task:
  prompt: copy
agent:
  type: cli
  binary: sh
  args: ["-c", "cat value.txt > out.txt; printf ' %s' \\"$TOKEN\\" >> out.txt"]
fixtures:
  - {{path: data/}}
secrets:
  TOKEN: "file:token.txt"
invariants:
  copied:
    check: {{type: file_content, path: out.txt, regex: "^value-[0-9]+ tok-1$"}}
"""


@pytest.mark.docker
async def test_watch_uploads_fixture_files_and_reruns_when_one_changes(daemon, api, stock_images, tmp_path):
    import hashlib

    spec = tmp_path / "files.yaml"
    spec.write_text(WITH_FILES)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "value.txt").write_text("value-1")
    (tmp_path / "token.txt").write_text("tok-1\n")
    engine = WatchEngine(spec, ApiLauncher(api), debounce_ms=200, poll_s=0.3)
    task = asyncio.create_task(engine.run())
    try:
        await eventually(lambda: _true(len(engine.finished) == 1), timeout=60)
        (tmp_path / "data" / "value.txt").write_text("value-2")  # a fixture file changed: rerun, new upload
        await eventually(lambda: _true(len(engine.finished) == 2), timeout=60)
    finally:
        engine.stop()
        await asyncio.wait_for(task, 30)
    for n, experiment_id in enumerate(engine.runs[:2], start=1):
        results = await api.get(f"/v1/experiments/{experiment_id}")
        assert results["status"] == "completed" and results["spec_version"] == n, results
        assert [s["verdict"] for s in results["scenarios"]] == ["pass"], results["scenarios"]
        record = await api.get("/v1/specs/watched-files", params={"version": n})
        assert record["files"] == [{"path": "data/value.txt", "size": 7,
                                    "sha256": hashlib.sha256(f"value-{n}".encode()).hexdigest()}]


def test_only_a_snapshot_agents_source_is_watched_and_its_caches_are_not(tmp_path):
    from tui.spec_file import SpecFile

    (tmp_path / "agent").mkdir()
    spec = tmp_path / "spec.yaml"
    spec.write_text("id: x\nagent: {type: cli, binary: sh, source: ./agent}\n")  # no such key for a cli agent
    assert SpecFile.read(spec).referenced_paths() == []
    spec.write_text("id: x\nagent: {type: snapshot, snapshot: mine, source: agent}\n")
    targets = {spec.resolve(), *SpecFile.read(spec).referenced_paths()}
    assert WatchEngine.relevant(targets, str(tmp_path / "agent" / "agent.py"))
    assert not WatchEngine.relevant(targets, str(tmp_path / "agent" / "__pycache__" / "agent.cpython-311.pyc"))
    assert not WatchEngine.relevant(targets, str(tmp_path / "elsewhere.py"))

@pytest.mark.docker
async def test_watch_reuploads_the_agents_source_and_reruns_when_it_is_edited(daemon, api, stock_images, tmp_path):
    """`agent.source`: the first run uploads the directory as my-agent (no `svc agents upload`); editing
    agent.py re-uploads it and the re-run has the new verdict; a change under __pycache__ is nothing."""
    spec = tmp_path / "from-source.yaml"
    spec.write_text(FROM_SOURCE_SPEC)
    source = tmp_path / "my-agent"
    source.mkdir()
    (source / "agent.py").write_text("open('/workspace/out.txt', 'w').write('bad')\n")
    engine = WatchEngine(spec, ApiLauncher(api), debounce_ms=200, poll_s=0.3)
    task = asyncio.create_task(engine.run())
    try:
        await eventually(lambda: _true(len(engine.finished) == 1), timeout=90)
        await asyncio.sleep(0.5)
        (source / "agent.py").write_text("open('/workspace/out.txt', 'w').write('good')\n")  # the fix
        await eventually(lambda: _true(len(engine.finished) == 2), timeout=90)
        (source / "__pycache__").mkdir()
        (source / "__pycache__" / "agent.cpython-311.pyc").write_bytes(b"x")
        await asyncio.sleep(2.0)
        assert len(engine.runs) == 2
    finally:
        engine.stop()
        await asyncio.wait_for(task, 30)
    verdicts = []
    for experiment_id in engine.runs:
        results = await api.get(f"/v1/experiments/{experiment_id}")
        verdicts.append([s["verdict"] for s in results["scenarios"]])
    assert verdicts == [["fail"], ["pass"]], verdicts
    versions = await api.get("/v1/agents/my-agent/versions")
    items = versions["items"] if isinstance(versions, dict) else versions
    assert sorted(v["version"] for v in items) == [1, 2]
    assert [e.message for e in engine.events if e.kind == "agent"] == [
        f"uploaded agent my-agent version {n} ({next(v['id'] for v in items if v['version'] == n)}) from its source" for n in (1, 2)]
