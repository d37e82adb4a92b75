"""Harbor tasks (tests/fixtures/harbor: three task directories in Harbor's layout, one installing
pytest with `RUN --network=host pip install`, through the operator's CA bundle) run in svc through the
real daemon and engine: every oracle (solution/solve.sh) of the directory passes through `svc eval run
DIR --oracle`, one task through `svc eval run TASK_DIR --oracle`, a do-nothing agent fails, a wrong
agent fails, and each run's score is the reward its tests/test.sh wrote. `svc tasks import` stores one
spec per task. Each environment is built once per content digest (later sessions reuse the image)."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import pytest
import pytest_asyncio

from client.local_spec import upload_body
from daemon.tasks import harbor
from tests.support.api import Api, start_api, stop_api
from tests.support.runs import start_run, wait_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images) -> Api:
    """The daemon of this module lets builds reach the network (SERVICE_BUILD_NETWORK=bridge, an operator's
    choice): sum-column's Dockerfile installs pytest with `RUN --network=host pip install`."""
    instance = await start_api(build_network="bridge")
    yield instance
    await stop_api(instance)
NOOP = {"type": "cli", "binary": "true"}
WRONG = {"type": "cli", "binary": "sh", "args": ["-c", "echo wrong > /app/hello.txt; echo 7 > /app/total.txt; "
                                                 "echo 'def median(v): return 0' > /app/stats.py"]}


def cli(api, *argv: str) -> tuple[int, str]:
    from client.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["--base-url", api.base_url(), "--api-key", api.key, *argv])
    return code, out.getvalue()


async def run_task(api, name: str, **agent) -> dict:
    task = harbor.load(TASKS / name)
    text = harbor.spec_yaml(task, **agent)
    with harbor.staged(task, text) as spec_path:  # as the CLI uploads it: the build context read with no link followed
        body = upload_body(spec_path, task.name, text)
    response, record = await api.post("/v1/specs", json=body)
    assert response.status == 201, record
    return await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=600)


def reward_line(run: dict) -> str:
    evidence = run["invariant_results"][0]["evidence"]
    return f"reward: {evidence['reward']}" if "reward" in evidence else json.dumps(run["invariant_results"])


async def test_every_oracle_of_a_directory_of_tasks_passes_with_score_one(api):
    code, out = await asyncio.to_thread(cli, api, "eval", "run", str(TASKS), "--oracle", "--poll", "0.2s")
    rows = json.loads(out)["tasks"]
    assert (code, [(r["task"], r["verdict"], r["score"]) for r in rows]) == (
        0, [("fix-median", "pass", 1.0), ("hello-world", "pass", 1.0), ("sum-column", "pass", 1.0)]), rows


async def test_a_do_nothing_agent_fails(api):
    run = await run_task(api, "fix-median", agent=NOOP)
    assert (run["verdict"], run["score"], reward_line(run)) == ("fail", 0.0, "reward: 0"), run


async def test_a_wrong_agent_fails(api):
    run = await run_task(api, "hello-world", agent=WRONG)
    assert (run["verdict"], run["score"], reward_line(run)) == ("fail", 0.0, "reward: 0"), run


async def test_tasks_import_stores_one_spec_per_task(api):
    code, out = await asyncio.to_thread(cli, api, "tasks", "import", str(TASKS))
    body = json.loads(out)
    assert (code, [t["spec_id"] for t in body["tasks"]], [bool(t["unmapped"]) for t in body["tasks"]]) == (
        0, ["fix-median", "hello-world", "sum-column"], [False, False, True]), body


async def test_eval_run_runs_a_task_directory_with_its_oracle(api):
    code, out = await asyncio.to_thread(cli, api, "eval", "run", str(TASKS / "hello-world"), "--oracle", "--json", "--poll", "0.2s")
    results = json.loads(out)
    assert (code, results["status"], results["scenarios"][0]["passed_runs"], (TASKS / "hello-world" / harbor.SPEC_NAME).exists()) == (
        0, "completed", 1, False), results
