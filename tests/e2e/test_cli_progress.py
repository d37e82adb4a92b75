"""The progress line of `svc eval run`, `svc replicas run --wait` and `svc watch`: rewritten in place on a terminal,
plain lines otherwise (real subprocesses; a pseudo-terminal plays the terminal)."""
from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import subprocess

import pytest

from client.progress import ProgressLine
from daemon.runner.engine import ENGINE_KEY
from tests.support.experiments import FakeRunner, start
from tests.support.cli import cli_environ, svc_command
from tests.support.procs import ROOT
from tests.support.specs import spec_yaml
from daemon.appkeys import RATE_LIMITER


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    return await start(aiohttp_client, tmp_path / "home", FakeRunner())


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "mixed.yaml"
    path.write_text(spec_yaml("mixed", matrix=[{"mode": "pass"}, {"mode": "fail"}, {"mode": "error"}]))
    return path


def run_with_stderr_on(stderr_fd: int, env, *args) -> int:
    return subprocess.run(svc_command(*args), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr_fd, timeout=120).returncode


def read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the pty's other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


async def stderr_on_a_terminal(env, *args) -> str:
    """What `svc args` writes to stderr when stderr is a pseudo-terminal."""
    leader, follower = pty.openpty()
    try:
        await asyncio.to_thread(run_with_stderr_on, follower, env, *args)
        os.close(follower)
        follower = -1
        return await asyncio.to_thread(read_all, leader)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


async def test_eval_run_prints_plain_progress_lines_when_not_a_terminal(api, tmp_path, spec):
    env = cli_environ(api.base_url(), api.key, tmp_path)
    proc = await asyncio.create_subprocess_exec(*svc_command("eval", "run", str(spec), "--poll", "50ms"), cwd=str(ROOT), env=env,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert "3/3 runs · pass 1 · fail 1 · error 1" in err.decode() and "\r" not in err.decode()


async def test_eval_run_rewrites_one_line_on_a_terminal(api, tmp_path, spec):
    env = cli_environ(api.base_url(), api.key, tmp_path)
    err = await stderr_on_a_terminal(env, "eval", "run", str(spec), "--poll", "50ms")
    assert "\r\x1b[2Ksvc: exp-" in err and "3/3 runs · pass 1 · fail 1 · error 1" in err


async def test_replicas_wait_counts_replicas_on_a_terminal(api, tmp_path):
    env = cli_environ(api.base_url(), api.key, tmp_path)
    spec = tmp_path / "rep.yaml"
    spec.write_text(spec_yaml("rep"))
    err = await stderr_on_a_terminal(env, "replicas", "run", str(spec), "-n", "3", "--wait")
    assert "3/3 runs · pass 3 · fail 0 · error 0" in err


class Capture:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return False


def test_plain_mode_prints_only_when_the_counts_change():
    out = Capture()
    line = ProgressLine("exp", stream=out)
    line.update(1, 4, 1, 0, 0)
    line.update(1, 4, 1, 0, 0)
    line.update(2, 4, 1, 1, 0)
    assert out.text.count("\n") == 2


def test_the_eta_comes_from_the_pace_so_far():
    line = ProgressLine("exp", stream=Capture())
    line.started -= 10  # ten seconds in, one run of three done: twenty seconds to go
    assert line.text(1, 3, 1, 0, 0).endswith("ETA 20s")


async def test_a_stream_refused_with_429_is_retried_before_its_first_event(api, tmp_path):
    await api.upload_yaml(spec_yaml("rep"), name="rep")
    response, suite = await api.post("/v1/replicas", json={"spec_id": "rep", "n_replicas": 2, "inputs": {"mode": "pass"}})
    assert response.status == 202, suite
    limiter = api.app[RATE_LIMITER]
    limiter.rate, limiter.burst = 1.0, 1
    for key in list(limiter.buckets):  # in debt: the watch's first request is refused with Retry-After
        limiter.buckets[key] = (-2.0, limiter.clock())
    env = cli_environ(api.base_url(), api.key, tmp_path)
    proc = await asyncio.create_subprocess_exec(*svc_command("replicas", "watch", suite["id"]), cwd=str(ROOT), env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0 and "429 rate_limited" in err.decode(), err.decode()
    assert json.loads(out.decode().splitlines()[-1])["type"] == "done"


async def stderr_of_watch(env, spec, terminal: bool) -> str:
    """What `svc watch spec` writes to stderr up to its first run's `finished` line (then ctrl-c);
    stderr is a pseudo-terminal or a pipe."""
    if terminal:
        leader, follower = pty.openpty()
    else:
        leader, follower = os.pipe()
    proc = subprocess.Popen(svc_command("watch", str(spec)), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    seen = ""
    try:
        while " finished " not in seen:
            chunk = await asyncio.to_thread(os.read, leader, 65536)
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.to_thread(proc.wait, 60)
        os.close(leader)
    return seen


async def test_watch_prints_plain_progress_lines_when_not_a_terminal(api, tmp_path, spec):
    err = await stderr_of_watch(cli_environ(api.base_url(), api.key, tmp_path), spec, terminal=False)
    assert "3/3 runs · pass 1 · fail 1 · error 1 · " in err and "\r" not in err


async def test_watch_rewrites_one_line_on_a_terminal(api, tmp_path, spec):
    err = await stderr_of_watch(cli_environ(api.base_url(), api.key, tmp_path), spec, terminal=True)
    assert "\r\x1b[2Ksvc: exp-" in err and "3/3 runs · pass 1 · fail 1 · error 1" in err


async def test_eval_run_says_how_many_runs_went_at_once(api, tmp_path, spec):
    """The daemon chooses the concurrency (resources.concurrency_limit: auto); the progress line says it."""
    env = cli_environ(api.base_url(), api.key, tmp_path)
    proc = await asyncio.create_subprocess_exec(*svc_command("eval", "run", str(spec), "--poll", "50ms"), cwd=str(ROOT), env=env,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    limit = api.app[ENGINE_KEY].limit
    assert f"3/3 runs · pass 1 · fail 1 · error 1 · {limit} at once · " in err.decode()
