"""A Harbor task's image as Harbor starts it (issue 43), through the real daemon and engine
(`svc eval run DIR --oracle`, task directories written in tmp_path): a WORKDIR under /workspace keeps
the files the Dockerfile put there (base.build.image_workspace: copied into the workspace at boot,
which the agent and the verifier both see), the image's ENTRYPOINT runs with svc's keep-alive as its
arguments (base.build.image_entrypoint: it adds an /etc/hosts line and starts a server that test.sh
reaches, the agent's leftovers stopped as usual), and `[agent] user` / `[verifier] user` run solve.sh
and test.sh as those users (a name and a numeric id); [environment.healthcheck] gates the agent."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.api import Api, start_api, stop_api

pytestmark = pytest.mark.asyncio(loop_scope="module")

IMAGE = "localhost/svc/python:3.11"
REPO = Path(__file__).resolve().parents[2]


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


def write_task(root: Path, name: str, *, test_sh: str, solve_sh: str, toml: str = "",
               environment: dict[str, str] | None = None) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "instruction.md").write_text(f"Task {name}.\n")
    env = "" if environment else f'docker_image = "{IMAGE}"\n'
    (task / "task.toml").write_text(f'schema_version = "1.1"\n\n[agent]\ntimeout_sec = 60.0\n\n[verifier]\n'
                                    f'timeout_sec = 60.0\n\n[environment]\n{env}{toml}')
    (task / "tests" / "test.sh").write_text(test_sh)
    (task / "solution" / "solve.sh").write_text(solve_sh)
    for rel, text in (environment or {}).items():
        (task / "environment" / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / "environment" / rel).write_text(text)
    return task


WORKSPACE_DOCKERFILE = f"FROM {IMAGE}\nWORKDIR /workspace/app\nCOPY data.txt .\n"
WORKSPACE_SOLVE = "#!/bin/sh\nset -e\ntr a-z A-Z < data.txt > answer.txt\n"
WORKSPACE_TEST = """#!/bin/sh
[ "$(pwd)" = /workspace/app ] && [ "$(cat data.txt)" = "from the image" ] && [ "$(cat answer.txt)" = "FROM THE IMAGE" ] \\
  && echo 1 > /logs/verifier/reward.txt || { ls -la; echo 0 > /logs/verifier/reward.txt; }
"""
ENTRY_DOCKERFILE = f"FROM {IMAGE}\nCOPY entry.sh /entry.sh\nENTRYPOINT [\"/bin/sh\", \"/entry.sh\"]\nCMD [\"false\"]\n"
ENTRY_SH = """#!/bin/sh
echo "127.0.0.1 blocks.internal" >> /etc/hosts
mkdir -p /srv/blocks && echo "block server up" > /srv/blocks/index.html
python3 -m http.server 9000 --directory /srv/blocks > /tmp/blocks.log 2>&1 &
exec "$@"
"""
ENTRY_TEST = """#!/bin/bash
for i in $(seq 50); do
  body=$(python3 -c 'import urllib.request; print(urllib.request.urlopen("http://blocks.internal:9000/").read().decode().strip())' 2>/dev/null) && break
  sleep 0.2
done
[ "$body" = "block server up" ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
USERS_SOLVE = "#!/bin/sh\necho \"$(id -un) $HOME\" > /tmp/solved-as\n"
USERS_TEST = """#!/bin/sh
[ "$(cat /tmp/solved-as)" = "nobody /nonexistent" ] && [ "$(id -u)" = 65534 ] \\
  && echo 1 > /logs/verifier/reward.txt || { cat /tmp/solved-as; id; echo 0 > /logs/verifier/reward.txt; }
"""


async def test_the_image_is_started_as_harbor_starts_it(api, tmp_path):
    write_task(tmp_path, "a-workspace", test_sh=WORKSPACE_TEST, solve_sh=WORKSPACE_SOLVE,
               environment={"Dockerfile": WORKSPACE_DOCKERFILE, "data.txt": "from the image\n"})
    write_task(tmp_path, "b-entrypoint", test_sh=ENTRY_TEST, solve_sh="#!/bin/sh\ntrue\n",
               environment={"Dockerfile": ENTRY_DOCKERFILE, "entry.sh": ENTRY_SH})
    write_task(tmp_path, "c-users", test_sh=USERS_TEST, solve_sh=USERS_SOLVE)
    (tmp_path / "c-users" / "task.toml").write_text((tmp_path / "c-users" / "task.toml").read_text()
                                                    .replace("[agent]\n", '[agent]\nuser = "nobody"\n')
                                                    .replace("[verifier]\n", "[verifier]\nuser = 65534\n"))
    code, out, err = await asyncio.to_thread(cli, api, "eval", "run", str(tmp_path), "--oracle", "--poll", "0.2s")
    rows = json.loads(out)["tasks"]
    got = [(r["task"], r["status"], r["verdict"], r["score"]) for r in rows]
    assert (code, got) == (0, [("a-workspace", "completed", "pass", 1.0), ("b-entrypoint", "completed", "pass", 1.0),
                               ("c-users", "completed", "pass", 1.0)]), (rows, err)
    assert [line for line in err.splitlines() if "not mapped" in line] == [], err


async def test_tasks_run_runs_a_directory_with_an_agent_of_your_own(api, tmp_path):
    write_task(tmp_path, "a-workspace", test_sh=WORKSPACE_TEST, solve_sh=WORKSPACE_SOLVE,
               environment={"Dockerfile": WORKSPACE_DOCKERFILE, "data.txt": "from the image\n"})
    write_task(tmp_path, "b-entrypoint", test_sh=ENTRY_TEST, solve_sh="#!/bin/sh\ntrue\n",
               environment={"Dockerfile": ENTRY_DOCKERFILE, "entry.sh": ENTRY_SH})
    (tmp_path / "b-entrypoint" / "tests" / "test.sh").write_text(  # passes only when the agent wrote answer.txt too
        ENTRY_TEST.replace('[ "$body" = "block server up" ]', '[ "$body" = "block server up" ] && [ -f /workspace/app/answer.txt ]'))
    reports = tmp_path.parent / f"{tmp_path.name}-reports"
    reports.mkdir()
    code, out, err = await asyncio.to_thread(cli, api, "tasks", "run", str(tmp_path), "--poll", "0.2",
                                             "--agent", "cli:cd /workspace/app && tr a-z A-Z < data.txt > answer.txt",
                                             "--junit", str(reports / "tasks.xml"), "--markdown", str(reports / "tasks.md"))
    rows = json.loads(out)["tasks"]
    assert (code, [(r["task"], r["verdict"], r["score"]) for r in rows]) == (
        1, [("a-workspace", "pass", 1.0), ("b-entrypoint", "fail", 0.0)]), (rows, err)
    import xmlschema  # one testcase per task, the failed one a failure; the table names both

    xmlschema.XMLSchema(str(REPO / "tests" / "support" / "junit.xsd")).validate(str(reports / "tasks.xml"))
    xml, table = (reports / "tasks.xml").read_text(), (reports / "tasks.md").read_text()
    assert ('tests="2" failures="1" errors="0"' in xml, "| `a-workspace` | pass | 1 |" in table,
            "| `b-entrypoint` | fail | 0 |" in table) == (True, True, True), (xml, table)
    code, out, err = await asyncio.to_thread(cli, api, "tasks", "run", str(tmp_path / "a-workspace"), "--poll", "0.2",
                                             "--agent", "cli:true")
    assert (code, [(r["task"], r["verdict"]) for r in json.loads(out)["tasks"]]) == (1, [("a-workspace", "fail")]), err


SLOW_ENTRY_SH = """#!/bin/sh
( sleep 3; touch /tmp/ready ) &
exec "$@"
"""
READY_SOLVE = "#!/bin/sh\nif [ -f /tmp/ready ]; then echo ready > answer.txt; else echo early > answer.txt; fi\n"
READY_TEST = """#!/bin/sh
[ "$(cat answer.txt)" = ready ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""


async def test_the_healthcheck_gates_the_agent_and_a_failing_one_errs_the_run(api, tmp_path):
    """[environment.healthcheck] runs before the agent as Harbor runs it: an image whose ENTRYPOINT
    gets ready 3 s after the start passes only when solve.sh waits for it (without the healthcheck
    it runs at once and writes `early`); a healthcheck that never passes errs the run at setup,
    naming it, after its retries."""
    dockerfile = f"FROM {IMAGE}\nCOPY entry.sh /entry.sh\nENTRYPOINT [\"/bin/sh\", \"/entry.sh\"]\n"
    health = ('\n[environment.healthcheck]\ncommand = "test -f /tmp/ready"\nstart_period_sec = 20\n'
              'start_interval_sec = 1\ninterval_sec = 1\nretries = 2\n')
    write_task(tmp_path, "a-ready", test_sh=READY_TEST, solve_sh=READY_SOLVE, toml=health,
               environment={"Dockerfile": dockerfile, "entry.sh": SLOW_ENTRY_SH})
    write_task(tmp_path, "b-never", test_sh=READY_TEST, solve_sh=READY_SOLVE,
               toml=health.replace("test -f /tmp/ready", "test -f /tmp/never").replace("start_period_sec = 20", "start_period_sec = 0"),
               environment={"Dockerfile": dockerfile, "entry.sh": SLOW_ENTRY_SH})
    code, out, err = await asyncio.to_thread(cli, api, "eval", "run", str(tmp_path), "--oracle", "--poll", "0.2s")
    rows = {r["task"]: r for r in json.loads(out)["tasks"]}
    runs = {}
    for name in rows:
        response, page = await api.get(f"/v1/runs?experiment_id={rows[name]['experiment_id']}")
        runs[name] = page["items"][0]
    never = runs["b-never"]
    message = (never["error"] or {}).get("message", "")
    assert (code, rows["a-ready"]["verdict"], rows["a-ready"]["score"], never["status"], "at step 'setup'" in message,
            "[environment.healthcheck] failed after 2 consecutive retries: test -f /tmp/never" in message) == \
        (1, "pass", 1.0, "errored", True, True), (never["error"], err)


ARG_DOCKERFILE = f"FROM {IMAGE}\nARG DIR=/srv/project\nWORKDIR $DIR\nCOPY data.txt .\n"
# the agent also plants a decoy WORKDIR where an earlier design kept it: the grader's directory is never its choice
HERE_SOLVE = "#!/bin/sh\nset -e\ntr a-z A-Z < data.txt > answer.txt\nprintf /tmp > /tmp/.svc-harbor-workdir\n"
HERE_TEST = """#!/bin/sh
[ "$(pwd)" = "$EXPECTED" ] && [ "$(cat answer.txt)" = "FROM THE IMAGE" ] && [ -f "$IN_WORKSPACE" ] && [ -f /tmp/entry-ran ] \\
  && echo 1 > /logs/verifier/reward.txt || { pwd; ls -la; echo 0 > /logs/verifier/reward.txt; }
"""
ENTRY_IMAGE = "localhost/svc-test/harbor-entry:1"


async def test_the_workdir_is_the_images_and_a_docker_image_starts_as_harbor_starts_it(api, tmp_path):
    """The WORKDIR is read from the running image, not the Dockerfile's text: one set through an
    ARG (`WORKDIR $DIR`) is where solve.sh and test.sh run, its files in the workspace; a task with
    only [environment] docker_image (an image with an ENTRYPOINT and a WORKDIR under /workspace) has
    its ENTRYPOINT run and its files there, as Harbor runs it."""
    import docker

    context = tmp_path.parent / f"{tmp_path.name}-image"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {IMAGE}\nWORKDIR /workspace/w\nRUN echo from the image > data.txt\n"
        "RUN printf '#!/bin/sh\\ntouch /tmp/entry-ran\\nexec \"$@\"\\n' > /entry.sh\nENTRYPOINT [\"/bin/sh\", \"/entry.sh\"]\n")
    await asyncio.to_thread(docker.from_env().images.build, path=str(context), tag=ENTRY_IMAGE, rm=True,
                            labels={"svc.test": "1"})
    arg_entry = ARG_DOCKERFILE + "RUN printf '#!/bin/sh\\ntouch /tmp/entry-ran\\nexec \"$@\"\\n' > /entry.sh\n" \
                                 "ENTRYPOINT [\"/bin/sh\", \"/entry.sh\"]\n"
    write_task(tmp_path, "a-arg", test_sh=HERE_TEST, solve_sh=HERE_SOLVE, toml='\n[verifier.env]\nEXPECTED = "/srv/project"\nIN_WORKSPACE = "/workspace/answer.txt"\n',
               environment={"Dockerfile": arg_entry, "data.txt": "from the image\n"})
    write_task(tmp_path, "b-image", test_sh=HERE_TEST, solve_sh=HERE_SOLVE,
               toml='\n[verifier.env]\nEXPECTED = "/workspace/w"\nIN_WORKSPACE = "/workspace/w/answer.txt"\n')
    (tmp_path / "b-image" / "task.toml").write_text(
        (tmp_path / "b-image" / "task.toml").read_text().replace(f'docker_image = "{IMAGE}"', f'docker_image = "{ENTRY_IMAGE}"'))
    code, out, err = await asyncio.to_thread(cli, api, "eval", "run", str(tmp_path), "--oracle", "--poll", "0.2s")
    rows = json.loads(out)["tasks"]
    assert (code, [(r["task"], r["verdict"], r["score"]) for r in rows], "not mapped" in err) == (
        0, [("a-arg", "pass", 1.0), ("b-image", "pass", 1.0)], False), (await evidence(api, rows), err)


async def evidence(api: Api, rows: list[dict]) -> list:
    """What each task's checks said (test.sh's output among it), for a failing assertion's message."""
    out = []
    for row in rows:
        _, page = await api.get(f"/v1/runs?experiment_id={row['experiment_id']}")
        out += [(row["task"], run.get("error"), [{k: v for k, v in (r.get("evidence") or {}).items() if k != "command"}
                                                 for r in run.get("invariant_results") or []]) for run in page["items"]]
    return out


COMPOSE = f"""services:
  main:
    build: .
  web:
    image: {IMAGE}
    environment:
      GREETING: hello-from-compose
    command: ["sh", "-c", "mkdir -p /srv && echo $$GREETING > /srv/index.html && exec python3 -m http.server 8000 --directory /srv"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://localhost:8000/')"]
    volumes: ["data:/data"]
  builder:
    build: ./builder
"""
WEB_SOLVE = """#!/bin/sh
python3 -c 'import urllib.request; print(urllib.request.urlopen("http://web:8000/").read().decode().strip())' > answer.txt
"""
WEB_TEST = """#!/bin/sh
[ "$(cat answer.txt)" = hello-from-compose ] && echo 1 > /logs/verifier/reward.txt || { cat answer.txt; echo 0 > /logs/verifier/reward.txt; }
"""


async def test_a_compose_service_with_an_image_is_started_beside_the_agent(api, tmp_path):
    """environment/docker-compose.yaml: a service of an image runs on the sandbox network under its
    name with its environment, command and healthcheck (solve.sh reads it at http://web:8000/); a
    build-only service and a service's volumes are named as not mapped."""
    write_task(tmp_path, "a-compose", test_sh=WEB_TEST, solve_sh=WEB_SOLVE,
               environment={"Dockerfile": f"FROM {IMAGE}\nWORKDIR /app\n", "docker-compose.yaml": COMPOSE})
    code, out, err = await asyncio.to_thread(cli, api, "eval", "run", str(tmp_path), "--oracle", "--poll", "0.2s")
    rows = json.loads(out)["tasks"]
    notes = sorted(line.split("not mapped: ", 1)[1] for line in err.splitlines() if "not mapped: " in line)
    assert (code, [(r["task"], r["verdict"], r["score"]) for r in rows], notes) == (
        0, [("a-compose", "pass", 1.0)],
        ["environment/docker-compose.yaml: service builder: built from a context (build:): not started (only services "
         "of an image are)", "environment/docker-compose.yaml: service web: volumes not mapped"]), (await evidence(api, rows), err)
