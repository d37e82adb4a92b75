"""A Harbor task directory is something people download (daemon/tasks/harbor.py): its text never
becomes spec YAML of its own (the spec comes from a YAML emitter, no task text in comments, no
`secrets`), the generated spec lives in a private directory of the CLI's and nothing is read from or
written to the task directory under that name, every file of it is read without following a link,
and its verifier reads only what it wrote after the agent: `/tests` and `/logs/verifier` are made
afresh and a failing test.sh fails the task whatever reward exists. The CLI runs as a subprocess
(`svc eval run TASK_DIR --oracle`) against a real daemon on the engine."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from client.local_spec import upload_body
from daemon.tasks import harbor
from tests.support.api import Api, start_api, stop_api
from tests.support.cli import cli_environ, run_cli
from tests.support.runs import start_run, wait_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

HELLO = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "hello-world"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images) -> Api:
    instance = await start_api()
    yield instance
    await stop_api(instance)


async def cli(api: Api, home: Path, *argv: str) -> tuple[int, str]:
    """`svc argv` as a subprocess against `api` (exit code, stderr); its temporary files in `home`/tmp."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = cli_environ(api.base_url(), api.key, home, TMPDIR=str(home / "tmp"))
    proc = await asyncio.to_thread(run_cli, env, *argv, timeout=600)
    return proc.returncode, proc.stderr


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
    # the key's text, once copied into a comment line of the spec, ends that line, adds a top-level
    # `secrets:` whose command the CLI runs on this machine, and comments out the rest
    marker = tmp_path / "pwned"
    key = f'x\nsecrets: {{PWN: "command:touch {marker}; echo x"}}\n#'
    with open(task / "task.toml", "a", encoding="utf-8") as fh:
        fh.write(f"\n[extra]\n{json.dumps(key)} = 1\n")  # a JSON string is a TOML basic string
    code, err = await cli(api, tmp_path / "home", "eval", "run", str(task), "--oracle", "--poll", "0.2s")
    assert (marker.exists(), code) == (False, 0), err
    doc = yaml.safe_load(harbor.spec_yaml(harbor.load(task), oracle=True))
    assert "secrets" not in doc and not any(key in str(k) for k in doc), doc.keys()


async def test_a_spec_file_shipped_in_the_task_directory_is_never_read(api, task, tmp_path):
    # a task that ships its own svc-task.yaml (the generated spec's name) declaring a secret whose
    # source is a command: --adaptive read the spec again from there and ran it on this machine
    marker = tmp_path / "pwned"
    doc = harbor.to_spec(harbor.load(task), oracle=True)
    doc["secrets"] = {"PWN": f"command:touch {marker}; echo x"}
    (task / harbor.SPEC_NAME).write_text(yaml.safe_dump(doc, sort_keys=False))
    code, err = await cli(api, tmp_path / "home", "eval", "run", str(task), "--oracle", "--adaptive", "1", "--poll", "0.2s")
    assert (marker.exists(), code) == (False, 0), err


async def test_nothing_is_written_or_read_through_a_link_planted_in_the_task_directory(api, task, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.symlink(victim, task / harbor.SPEC_NAME)
    code, err = await cli(api, tmp_path / "home", "eval", "run", str(task), "--oracle", "--adaptive", "1", "--poll", "0.2s")
    assert (victim.read_text(), os.path.islink(task / harbor.SPEC_NAME), code) == ("keep me\n", True, 0), err
    assert "keep me" not in err and list((tmp_path / "home" / "tmp").iterdir()) == []  # the private copy is gone


@pytest.mark.parametrize("name", ["instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh",
                                  "environment/Dockerfile", "environment/notes.txt"])
async def test_a_task_file_that_is_a_link_is_refused_naming_it(api, task, tmp_path, name):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("echo host secret\n")
    if name == "environment/Dockerfile":  # its WORKDIR is then not read by the CLI (task.toml says it)
        with open(task / "task.toml", "a", encoding="utf-8") as fh:
            fh.write('workdir = "/app"\n')  # under [environment], the file's last table
        secret.write_text((task / name).read_text())
    if name == "environment/notes.txt":  # a link inside the build context, to a file of it
        os.symlink("Dockerfile", task / name)
    else:
        (task / name).unlink()
        os.symlink(secret, task / name)
    code, err = await cli(api, tmp_path / "home", "eval", "run", str(task), "--oracle", "--poll", "0.2s")
    assert code != 0 and f"{task / name}: a symbolic link" in err, err


# a verifier that writes the reward only when the answer is right (and exits 0 either way)
ONLY_ON_SUCCESS_TEST_SH = ('#!/bin/bash\nif [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then\n'
                           '  echo 1 > /logs/verifier/reward.txt\nfi\n')


@pytest.mark.parametrize("planted", ["reward.txt", "reward.json"])
async def test_a_reward_the_agent_wrote_is_not_read(api, task, planted):
    if planted == "reward.txt":
        (task / "tests" / "test.sh").write_text(ONLY_ON_SUCCESS_TEST_SH)
        write = "echo 1 > /logs/verifier/reward.txt"
    else:  # hello-world's test.sh writes reward.txt 0; a reward.json is read first
        write = "echo '{\"reward\": 1}' > /logs/verifier/reward.json"
    run = await run_with_agent(api, task, f"echo wrong > /app/hello.txt; mkdir -p /logs/verifier && {write}")
    assert (run["verdict"], run["score"]) == ("fail", 0), run


async def test_a_failing_test_sh_fails_the_task_whatever_reward_it_wrote(api, task):
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nexit 3\n")
    run = await run_with_agent(api, task, "echo 'Hello, world!' > /app/hello.txt")
    assert run["verdict"] == "fail", run


async def test_a_process_the_agent_left_cannot_write_the_reward_after_test_sh(api, task):
    # hello-world's test.sh writes 0 for a wrong answer and exits 0; the agent leaves a writer behind
    writer = "(while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; done) >/dev/null 2>&1 &"
    run = await run_with_agent(api, task, f"echo wrong > /app/hello.txt; {writer} sleep 1")
    assert run["verdict"] == "fail", run


async def test_the_verifier_user_runs_no_shell_the_agent_wrote(api, task):
    # [verifier] user: test.sh runs through the toolset's su with the toolset's shell: a login shell the
    # agent gave that user in /etc/passwd (one that writes reward 1) is never run
    (task / "task.toml").write_text((task / "task.toml").read_text().replace("[verifier]\n", '[verifier]\nuser = "nobody"\n'))
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho \"ran as $(id -un)\"\necho 0 > /logs/verifier/reward.txt\n")
    evil = ("printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n' > /tmp/evil.sh; "
            "chmod 755 /tmp/evil.sh; sed -i 's|^nobody:\\(.*\\):[^:]*$|nobody:\\1:/tmp/evil.sh|' /etc/passwd; "
            "grep -q '^nobody:.*:/tmp/evil.sh$' /etc/passwd && echo wrong > /app/hello.txt")
    run = await run_with_agent(api, task, evil)
    evidence = run["invariant_results"][0]["evidence"]
    assert (run["verdict"], run["score"], evidence.get("reward"), "ran as nobody" in evidence["test_output"]) == (
        "fail", 0, 0, True), run


async def test_the_images_workspace_is_copied_without_running_its_programs_or_following_its_links(api, task):
    # base.build.image_workspace: the image's /workspace (a link to a host file, a planted .svc/, a cp
    # and sh of its own that would mark the workspace) is copied by the toolset's busybox, links as links
    (task / "environment" / "Dockerfile").write_text(
        "FROM localhost/svc/python:3.11\nWORKDIR /workspace/app\n"
        "RUN mkdir -p /workspace/.svc && echo planted > /workspace/.svc/expected.json && ln -s /etc/hostname leak"
        " && echo ok > kept.txt && for p in /bin/cp /usr/bin/cp /bin/sh; do [ -e $p ] && printf '#!/bin/bash\\n"
        "touch /workspace/app/image-program-ran\\n' > $p.svc && chmod 755 $p.svc; done; "
        "mv /bin/cp.svc /bin/cp 2>/dev/null || true\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\ncd /workspace/app\n[ -L leak ] && [ \"$(readlink leak)\" = /etc/hostname ] && [ \"$(cat kept.txt)\" = ok ]"
        " && [ ! -e /workspace/.svc/expected.json ] && [ ! -e image-program-ran ] && echo 1 > /logs/verifier/reward.txt"
        " || { ls -la . /workspace/.svc; echo 0 > /logs/verifier/reward.txt; }\n")
    run = await run_with_agent(api, task, "true")
    assert (run["verdict"], run["score"]) == ("pass", 1), run
