"""How the CLI fails: one line naming the problem, exit 1; a closed pipe ends it quietly; refusals
(429, connection refused) are retried."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from daemon.app import create_app
from tests.support.api import make_settings, start_api, stop_api
from tests.support.cli import cli_environ, free_port, run_cli, svc_command
from tests.support.homes import short_home
from tests.support.procs import ROOT
from daemon.appkeys import RATE_LIMITER


@pytest.fixture
def env(daemon, tmp_path):
    return cli_environ(daemon.base_url(), daemon.key, tmp_path)


async def test_a_closed_pipe_ends_the_command_quietly(daemon, env):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte, as with `| head -0`
    try:
        proc = await asyncio.create_subprocess_exec(*svc_command("eval", "list"), cwd=str(ROOT), env=env,
                                                    stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    _, err = await proc.communicate()
    assert (proc.returncode, err.decode()) == (0, "")


async def test_a_bad_base_url_is_one_line_naming_it(env):
    result = await asyncio.to_thread(run_cli, env, "--base-url", "http://127.0.0.1:notaport", "eval", "list")
    assert (result.returncode, result.stderr.strip()) == (1, "svc: base URL 'http://127.0.0.1:notaport' has an invalid port")


async def test_a_usage_error_exits_1_on_one_line(env):
    result = await asyncio.to_thread(run_cli, env, "runs", "get")
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "the following arguments are required: run_id" in result.stderr


async def test_a_bad_timeout_in_the_environment_is_named(env):
    result = await asyncio.to_thread(run_cli, {**env, "SERVICE_TIMEOUT": "soon"}, "eval", "list")
    assert (result.returncode, result.stderr.strip()) == (1, "svc: timeout from env must be seconds or a duration like 30s, got 'soon'")


async def test_a_missing_spec_file_is_one_line(env, tmp_path):
    result = await asyncio.to_thread(run_cli, env, "eval", "run", str(tmp_path / "nope.yaml"))
    assert (result.returncode, result.stderr) == (1, f"svc: {tmp_path / 'nope.yaml'}: no such file\n")


async def test_a_refused_query_value_is_one_line_naming_it(daemon, env):
    result = await asyncio.to_thread(run_cli, env, "logs", "traces", "--since", "yesterday")
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "since" in result.stderr


async def test_the_timeout_flag_takes_specs_duration_spelling(daemon, env):
    result = await asyncio.to_thread(run_cli, env, "--timeout", "30s", "eval", "list")
    assert result.returncode == 0, result.stderr


async def test_a_rate_limited_request_is_retried_after_retry_after(tmp_path):
    api = await start_api(rate_limit_per_s=1.0, rate_limit_burst=1)
    try:
        env = cli_environ(api.base_url(), api.key, tmp_path)
        drained, _ = await api.get("/v1/experiments")  # creates the key's bucket
        assert drained.status == 200
        limiter = api.app[RATE_LIMITER]
        for key in limiter.buckets:  # five tokens in debt: refused for ~6 s, whatever the CLI's start-up time
            limiter.buckets[key] = (-5.0, limiter.clock())
        result = await asyncio.to_thread(run_cli, env, "eval", "list")
        assert result.returncode == 0, result.stderr
        assert "429 rate_limited" in result.stderr and json.loads(result.stdout)["items"] == []
    finally:
        await stop_api(api)


async def test_a_refused_connection_is_retried_until_the_daemon_answers(tmp_path):
    port = free_port()
    env = cli_environ(f"http://127.0.0.1:{port}", None, tmp_path)
    proc = await asyncio.create_subprocess_exec(*svc_command("eval", "list"), cwd=str(ROOT), env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    first = await asyncio.wait_for(proc.stderr.readline(), 30)
    assert b"connection refused" in first  # nothing listens yet
    home = short_home("svc-retry-")
    server = TestClient(TestServer(create_app(make_settings(home, auth_disabled=True)), port=port))
    await server.start_server()
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert (proc.returncode, json.loads(out)["items"]) == (0, []), err
    finally:
        await server.close()
        shutil.rmtree(home, ignore_errors=True)


async def test_a_503_is_retried_and_the_next_answer_is_used(tmp_path):
    """A stand-in for the daemon that answers 503 (Retry-After: 0) once, then an empty page."""
    answers = []

    async def unavailable_once(request):
        answers.append(request.path)
        if len(answers) == 1:
            return web.json_response({"error": "unavailable", "message": "starting up"}, status=503, headers={"Retry-After": "0"})
        return web.json_response({"items": [], "next_cursor": None, "count": 0})

    app = web.Application()
    app.router.add_get("/v1/experiments", unavailable_once)
    server = TestServer(app, port=free_port())
    await server.start_server()
    try:
        env = cli_environ(str(server.make_url("")).rstrip("/"), "svc_live_" + "k" * 32, tmp_path)
        result = await asyncio.to_thread(run_cli, env, "eval", "list")
    finally:
        await server.close()
    assert (result.returncode, len(answers), "503 unavailable" in result.stderr) == (0, 2, True), result.stderr
