"""Harbor's execution semantics in svc (issue 43), on task directories these tests write in tmp_path,
through the real daemon and engine (`svc eval run DIR --oracle`): the solution's background server is
still up when test.sh queries it (agent.keep_running), solve.sh runs from /solution through its
shebang beside its helper file, a reward.json of metrics without `reward` scores their mean, a
fractional reward is the score (and fails), `[environment] workdir` and the three env tables apply,
and a task that cannot run (no solve.sh) is listed with its reason while the others run."""
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

IMAGE = "localhost/svc/python:3.11"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images) -> Api:
    instance = await start_api()
    yield instance
    await stop_api(instance)


def cli(api: Api, *argv: str) -> tuple[int, str, str]:
    from client.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--base-url", api.base_url(), "--api-key", api.key, *argv])
    return code, out.getvalue(), err.getvalue()


def write_task(root: Path, name: str, *, test_sh: str, solve_sh: str | None, toml: str = "",
               solution_files: dict[str, str] | None = None) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text(f"Task {name}.\n")
    (task / "task.toml").write_text(f'schema_version = "1.1"\n\n[task]\nname = "svc/{name}"\n\n'
                                    f'[agent]\ntimeout_sec = 60.0\n\n[verifier]\ntimeout_sec = 60.0\n\n'
                                    f'[environment]\ndocker_image = "{IMAGE}"\n{toml}')
    (task / "tests" / "test.sh").write_text(test_sh)
    if solve_sh is not None:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text(solve_sh)
        for rel, text in (solution_files or {}).items():
            (task / "solution" / rel).write_text(text)
    return task


SERVER_SOLVE = """#!/bin/bash
mkdir -p /srv/site && echo served > /srv/site/index.html
nohup python3 -m http.server 8765 --directory /srv/site > /tmp/server.log 2>&1 &
for i in $(seq 50); do python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8765/")' 2>/dev/null && break; sleep 0.2; done
"""
SERVER_TEST = """#!/bin/bash
body=$(python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8765/index.html").read().decode().strip())')
if [ "$body" = served ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
HELPER_SOLVE = """#!/usr/bin/env python3
import os, subprocess, sys
here = os.path.dirname(os.path.abspath(sys.argv[0]))
subprocess.run([sys.executable, os.path.join(here, "helper.py")], check=True)
"""
HELPER_TEST = """#!/bin/bash
[ "$(cat answer.txt)" = "from the helper in /solution" ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
METRICS_TEST = """#!/bin/bash
echo '{"accuracy": 1, "f1": 0.5, "note": "not a number"}' > /logs/verifier/reward.json
"""
FRACTION_TEST = "#!/bin/bash\necho 0.25 > /logs/verifier/reward.txt\n"
ENV_TOML = """workdir = "/srv/work"

[environment.env]
FROM_ENVIRONMENT = "e"

[solution.env]
FROM_SOLUTION = "s"

[verifier.env]
FROM_VERIFIER = "v"
"""
ENV_SOLVE = '#!/bin/sh\necho "$(pwd) $FROM_ENVIRONMENT $FROM_SOLUTION $DEBIAN_FRONTEND" > seen.txt\n'
ENV_TEST = """#!/bin/sh
[ "$(cat seen.txt)" = "/srv/work e s noninteractive" ] && [ "$(pwd)" = /srv/work ] && [ "$FROM_VERIFIER $FROM_ENVIRONMENT" = "v e" ] \\
  && echo 1 > /logs/verifier/reward.txt || { cat seen.txt; echo 0 > /logs/verifier/reward.txt; }
"""


async def test_a_directory_run_follows_harbors_semantics_and_reports_every_task(api, tmp_path):
    write_task(tmp_path, "a-server", test_sh=SERVER_TEST, solve_sh=SERVER_SOLVE)
    write_task(tmp_path, "b-helper", test_sh=HELPER_TEST, solve_sh=HELPER_SOLVE,
               solution_files={"helper.py": "open('answer.txt', 'w').write('from the helper in /solution\\n')\n"})
    write_task(tmp_path, "c-metrics", test_sh=METRICS_TEST, solve_sh="#!/bin/sh\ntrue\n")
    write_task(tmp_path, "d-fraction", test_sh=FRACTION_TEST, solve_sh="#!/bin/sh\ntrue\n")
    write_task(tmp_path, "e-env", test_sh=ENV_TEST, solve_sh=ENV_SOLVE, toml=ENV_TOML)
    write_task(tmp_path, "f-no-solution", test_sh=FRACTION_TEST, solve_sh=None)
    code, out, err = await asyncio.to_thread(cli, api, "eval", "run", str(tmp_path), "--oracle", "--keep-agent-processes",
                                             "--poll", "0.2s")
    rows = json.loads(out)["tasks"]
    got = [(r["task"], r["status"], r["verdict"], r["score"]) for r in rows]
    assert (code, got) == (1, [
        ("a-server", "completed", "pass", 1.0), ("b-helper", "completed", "pass", 1.0),
        ("c-metrics", "completed", "fail", 0.75), ("d-fraction", "completed", "fail", 0.25),
        ("e-env", "completed", "pass", 1.0), ("f-no-solution", "not_run", None, None)]), (rows, err)
    notes = [line for line in err.splitlines() if "not mapped" in line and "an ENTRYPOINT of the image" not in line]
    assert "solution/solve.sh is missing" in rows[-1]["reason"] and notes == [], err


async def test_the_metrics_of_a_reward_json_are_shown_in_the_checks_evidence(api, tmp_path):
    task = harbor.load(write_task(tmp_path, "metrics", test_sh=METRICS_TEST, solve_sh="#!/bin/sh\ntrue\n"))
    text = harbor.spec_yaml(task, oracle=True)
    with harbor.staged(task, text) as spec_path:  # as the CLI uploads it: the build context read with no link followed
        body = upload_body(spec_path, task.name, text)
    response, record = await api.post("/v1/specs", json=body)
    assert response.status == 201, record
    run = await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=300)
    evidence = run["invariant_results"][0]["evidence"]
    assert (run["verdict"], run["score"], evidence.get("metrics"), evidence.get("reward"), evidence.get("reward_from")) == (
        "fail", 0.75, {"accuracy": 1, "f1": 0.5}, 0.75, "mean of reward.json metrics"), run
