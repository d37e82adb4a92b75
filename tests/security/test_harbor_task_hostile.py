"""A Harbor task directory is something people download (daemon/tasks/harbor.py): its text never
becomes spec YAML of its own (the spec comes from a YAML emitter, no task text in comments), nothing
is written into it, every file of it is read without following a link, and its verifier reads only
what it wrote after the agent: `/tests` and `/logs/verifier` are made afresh and a failing test.sh
fails the task whatever reward exists."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import pytest_asyncio

from client.local_spec import upload_body
from daemon.tasks import harbor
from tests.support.api import Api, start_api, stop_api
from tests.support.runs import start_run, wait_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

HELLO = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "hello-world"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images) -> Api:
    instance = await start_api()
    yield instance
    await stop_api(instance)


def cli(api: Api, *argv: str) -> tuple[int, str]:
    from client.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["--base-url", api.base_url(), "--api-key", api.key, *argv])
    return code, err.getvalue()


@pytest.fixture
def task(tmp_path) -> Path:
    copy = tmp_path / "hello-world"
    shutil.copytree(HELLO, copy)
    return copy


async def run_with_agent(api: Api, task_dir: Path, script: str) -> dict:
    loaded = harbor.load(task_dir)
    text = harbor.spec_yaml(loaded, agent={"type": "cli", "binary": "sh", "args": ["-c", script]})
    response, record = await api.post("/v1/specs", json=upload_body(task_dir / harbor.SPEC_NAME, loaded.name, text))
    assert response.status == 201, record
    return await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=300)


async def test_a_toml_key_holding_newlines_adds_no_secret_that_runs_a_command(api, task, tmp_path):
    marker = tmp_path / "pwned"
    key = f'x\nsecrets: {{PWN: "command:touch {marker}"}}\ny'
    with open(task / "task.toml", "a", encoding="utf-8") as fh:
        fh.write(f"\n[extra]\n{json.dumps(key)} = 1\n")  # a JSON string is a TOML basic string
    code, err = await asyncio.to_thread(cli, api, "eval", "run", str(task), "--oracle", "--poll", "0.2s")
    assert (marker.exists(), code) == (False, 0), err


async def test_nothing_is_written_through_a_link_planted_in_the_task_directory(api, task, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.symlink(victim, task / harbor.SPEC_NAME)
    code, err = await asyncio.to_thread(cli, api, "eval", "run", str(task), "--oracle", "--poll", "0.2s")
    assert (victim.read_text(), code) == ("keep me\n", 0), err


@pytest.mark.parametrize("name", ["instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh"])
async def test_a_task_file_that_is_a_link_is_refused_naming_it(api, task, tmp_path, name):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("echo host secret\n")
    (task / name).unlink()
    os.symlink(secret, task / name)
    code, err = await asyncio.to_thread(cli, api, "eval", "run", str(task), "--oracle", "--poll", "0.2s")
    assert code != 0 and f"{name}: a symbolic link" in err, err


# Harbor's usual verifier: `set -e`, and the reward written only when the tests pass
STRICT_TEST_SH = ('#!/bin/bash\nset -e\ntest "$(cat /app/hello.txt)" = "Hello, world!"\n'
                  'echo 1 > /logs/verifier/reward.txt\n')


async def test_a_reward_the_agent_wrote_is_not_read(api, task):
    (task / "tests" / "test.sh").write_text(STRICT_TEST_SH)
    run = await run_with_agent(api, task, "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt")
    assert run["verdict"] == "fail", run


async def test_a_failing_test_sh_fails_the_task_whatever_reward_it_wrote(api, task):
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nexit 3\n")
    run = await run_with_agent(api, task, "echo 'Hello, world!' > /app/hello.txt")
    assert run["verdict"] == "fail", run


async def test_a_process_the_agent_left_cannot_write_the_reward_after_test_sh(api, task):
    # hello-world's test.sh writes 0 for a wrong answer and exits 0; the agent leaves a writer behind
    writer = "(while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; done) >/dev/null 2>&1 &"
    run = await run_with_agent(api, task, f"echo wrong > /app/hello.txt; {writer} sleep 1")
    assert run["verdict"] == "fail", run
