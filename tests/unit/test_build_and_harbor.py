"""Pure parts of Dockerfile bases (daemon/sandbox/build.py: the Dockerfile the engine builds, the line
a failure names, the content digest) and of the Harbor mapping (daemon/tasks/harbor.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from daemon.sandbox import build
from daemon.sandbox.models import BootFailure
from daemon.spec import load_spec
from daemon.tasks import harbor

TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"
DOCKERFILE = """\
FROM localhost/svc/python:3.11
# install
RUN --network=host pip install \\
    pytest
RUN echo done
"""


def test_run_lines_get_the_ca_secret_and_lose_network_flags_on_their_own_line_numbers():
    out = build.rewrite(DOCKERFILE, ca_bundle=True).splitlines()
    assert (len(out), out[2], out[4]) == (5, f"RUN {build.CA_MOUNT}pip install \\", f"RUN {build.CA_MOUNT}echo done")


def test_run_network_none_is_refused_naming_its_line():
    with pytest.raises(BootFailure, match="Dockerfile line 2: RUN --network=none"):
        build.rewrite("FROM x\nRUN --network=none true\n", ca_bundle=False)


def test_a_failed_step_is_traced_back_to_its_dockerfile_line():
    title = "[3/3] RUN echo done"
    message = build.failure_message("Dockerfile", DOCKERFILE, title, ["#7 ERROR: exit code: 3"])
    assert message.startswith("the image build failed at Dockerfile line 5: RUN echo done"), message


def test_from_images_skip_stages_and_scratch_and_substitute_args():
    text = "ARG BASE=localhost/a:1\nFROM $BASE AS builder\nFROM scratch\nFROM builder\nFROM localhost/b:2\n"
    assert build.from_images(text, {}) == [(2, "localhost/a:1"), (5, "localhost/b:2")]


def test_the_digest_follows_content_args_and_dockerfile_only():
    doc = load_spec("version: 1\nid: d\nbase: {build: {context: env, args: {A: '1'}}}\ntask: {prompt: p}\n"
                    "invariants: {x: {check: {type: file_exists, path: x}}}\n", "d.yaml")
    files = {"Dockerfile": {"digest": "aa", "mode": 0o644}}
    same = build.build_digest(doc, {"Dockerfile": {"digest": "aa", "mode": 0o644, "size": 9}})
    other = build.build_digest(doc, {"Dockerfile": {"digest": "bb", "mode": 0o644}})
    assert (build.build_digest(doc, files) == same, build.build_digest(doc, files) == other) == (True, False)


def test_every_fixture_task_becomes_a_valid_spec():
    specs = [load_spec(harbor.spec_yaml(harbor.load(d), oracle=True), "t.yaml") for d in harbor.task_dirs(TASKS)]
    assert [(s.id, s.agent.timeout, s.resources.cpus) for s in specs] == [
        ("fix-median", 60.0, 1.0), ("hello-world", 60.0, 1.0), ("sum-column", 120.0, 1.0)]


def test_what_cannot_be_mapped_is_named(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "task.toml").write_text((task / "task.toml").read_text() + "gpus = 1\n\n[extra]\nfoo = 1\n")
    (task / "solution" / "solve.sh").unlink()
    unmapped = harbor.load(task).unmapped
    assert [note.split(":")[0] for note in unmapped] == [
        "task.toml [environment] gpus = 1", "task.toml [extra] foo = 1", "solution/solve.sh is missing"], unmapped


def test_an_exported_spec_imports_back_to_the_same_task(tmp_path):
    task = harbor.load(TASKS / "fix-median")
    doc = harbor.to_spec(task)
    files = {f"environment/{p.name}": p.read_bytes() for p in (task.path / "environment").iterdir()}
    notes = harbor.export(doc, files, tmp_path / "out")
    again = harbor.to_spec(harbor.load(tmp_path / "out"))
    assert (notes, again["task"], again["base"], again["resources"], again["agent"] if "agent" in again else None,
            (tmp_path / "out" / "environment" / "stats.py").read_bytes()) == (
        [], doc["task"], doc["base"], doc["resources"], None, files["environment/stats.py"])


def test_a_workdir_under_workspace_is_not_moved_and_the_images_files_are_copied_in(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "environment" / "Dockerfile").write_text("FROM localhost/svc/python:3.11\nWORKDIR /workspace\n")
    loaded = harbor.load(task)
    build = load_spec(harbor.spec_yaml(loaded), "t.yaml").base.build
    assert ('case "$wd" in /workspace|/workspace/*) exec mkdir -p "$wd"' in harbor.setup_command(loaded), loaded.unmapped,
            build.image_workspace, build.image_entrypoint) == (True, [], True, True)


def test_a_docker_image_task_is_built_from_the_image_and_a_bad_reference_is_refused(tmp_path):
    """Without environment/Dockerfile the task is built `FROM` its docker_image, so the image's
    ENTRYPOINT runs and its /workspace is copied in, as with a Dockerfile of the task's; the image
    reference is one line of the generated Dockerfile, so anything but a reference is refused."""
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "environment" / "Dockerfile").unlink()
    (task / "task.toml").write_text('[environment]\ndocker_image = "localhost/svc/python:3.11"\n')
    loaded = harbor.load(task)
    build = load_spec(harbor.spec_yaml(loaded), "t.yaml").base.build
    assert (loaded.unmapped, harbor.context_files(loaded), build.image_entrypoint, build.image_workspace) == (
        [], {"environment/Dockerfile": (b"FROM localhost/svc/python:3.11\n", 0o644)}, True, True)
    (task / "task.toml").write_text('[environment]\ndocker_image = "alpine\\nRUN touch /owned"\n')
    with pytest.raises(harbor.TaskError, match="docker_image = 'alpine\\\\nRUN touch /owned': not an image reference"):
        harbor.load(task)


def test_a_multi_step_task_is_refused_naming_it(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "instruction.md").unlink()
    (task / "steps" / "01-first").mkdir(parents=True)
    (task / "steps" / "01-first" / "instruction.md").write_text("first\n")
    (task / "task.toml").write_text((task / "task.toml").read_text() + '\n[[steps]]\nname = "01-first"\n')
    assert harbor.task_dirs(tmp_path) == [task]  # found without a root instruction.md, then refused by name
    with pytest.raises(harbor.TaskError, match=r"a multi-step task \(1 steps\): not mapped"):
        harbor.load(task)


def test_a_compose_environment_maps_its_image_services_and_names_the_rest(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main: {build: .}\n  db: {image: postgres, environment: [POSTGRES_PASSWORD=pw], ports: ['5432:5432']}\n"
        "  cache: {image: redis, command: redis-server --save ''}\n  Bad_Name: {image: redis}\n  tool: {build: ./tool}\n")
    loaded = harbor.load(task)
    services = load_spec(harbor.spec_yaml(loaded), "t.yaml").services
    assert ([(s.name, s.type, s.image, s.env, s.command) for s in services],
            [n for n in loaded.unmapped if "compose" in n]) == (
        [("cache", "generic", "docker.io/library/redis", {}, ["redis-server", "--save", ""]),
         ("db", "generic", "docker.io/library/postgres", {"POSTGRES_PASSWORD": "pw"}, None)],
        ["environment/docker-compose.yaml: service 'Bad_Name': not a DNS-safe name, not started",
         "environment/docker-compose.yaml: service db: ports not mapped",
         "environment/docker-compose.yaml: service tool: built from a context (build:): not started (only services of an "
         "image are)"])
    (task / "environment" / "Dockerfile").unlink()
    with pytest.raises(harbor.TaskError, match=r"a multi-container task \(environment/docker-compose.yaml without"):
        harbor.load(task)


def test_the_agent_and_verifier_users_wrap_solve_and_test_and_a_bad_one_is_named(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    base = (task / "task.toml").read_text()
    (task / "task.toml").write_text(base.replace("[agent]\n", '[agent]\nuser = "dev"\n').replace("[verifier]\n", "[verifier]\nuser = 1000\n"))
    loaded = harbor.load(task)
    doc = harbor.to_spec(loaded, oracle=True)
    script, check = doc["agent"]["args"][1], doc["invariants"]["reward"]["check"]["command"]
    assert ("/.svc-tools/busybox su -s /.svc-tools/bin/sh \"$u\" -c 'cd \"$wd\" && exec /solution/solve.sh'" in script,
            "u=dev;" in script, "u=1000;" in check, "chmod 1777 /logs/verifier" in check, loaded.unmapped) == (
        True, True, True, True, [])
    (task / "task.toml").write_text(base.replace("[agent]\n", '[agent]\nuser = "x; rm -rf /"\n'))
    loaded = harbor.load(task)
    assert ("su -s" in harbor.to_spec(loaded, oracle=True)["agent"]["args"][1], loaded.unmapped) == (
        False, ["task.toml [agent] user = 'x; rm -rf /': not a user name or id, ignored"])


def _decide(tmp_path, status: int, reward_json: str | None = None, reward_txt: str | None = None) -> dict:
    """harbor.REWARD_AWK run by this machine's awk (the verifier runs the image's) on reward files."""
    import json
    import subprocess

    paths = {}
    for name, text in (("reward.json", reward_json), ("reward.txt", reward_txt)):
        if text is not None:
            (tmp_path / name).write_text(text)
            paths[name] = str(tmp_path / name)
    out = subprocess.run(["awk", "-v", f"status={status}", "-v", f"json={paths.get('reward.json', '')}",
                          "-v", f"txt={paths.get('reward.txt', '')}", harbor.REWARD_AWK],
                         input='test "output"\n', capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("status, reward_json, reward_txt, expected", [
    (0, None, "1\n", (True, 1, "reward.txt", None)),
    (0, None, "0.25", (False, 0.25, "reward.txt", None)),
    (0, '{"reward": 1, "detail": "x"}', "0", (True, 1, "reward.json", {"reward": 1})),
    (0, '{"accuracy": 1, "f1": 0.5, "nested": {"a": 9}, "ok": true}', None,
     (False, 0.75, "mean of reward.json metrics", {"accuracy": 1, "f1": 0.5})),
    (0, '{"accuracy": 1}', "0.5", (False, 0.5, "reward.txt", {"accuracy": 1})),
    (0, '{"reward": 2}', None, (True, 1, "reward.json", {"reward": 2})),
    (3, None, "1", (False, 0, None, None)),
    (0, "[1]", None, (False, 0, None, None)),
    (0, None, "yes", (False, 0, None, None)),
    (0, None, None, (False, 0, None, None)),
])
def test_rewards_are_read_as_harbor_reads_them(tmp_path, status, reward_json, reward_txt, expected):
    report = _decide(tmp_path, status, reward_json, reward_txt)
    evidence = report["evidence"]
    assert (report["passed"], report["score"], evidence.get("reward_from"), evidence.get("metrics")) == expected, report
    assert evidence["test_output"] == 'test "output"\n' and ("error" in evidence) == (expected[2] is None), report


def test_the_oracle_runs_from_solution_with_its_env_and_keeps_running_when_asked(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "solution" / "helper.sh").write_text("echo helped\n")
    (task / "task.toml").write_text('schema_version = "1.1"\n\n[task]\nname = "org/t"\nkeywords = ["k"]\n\n'
                                    '[environment]\ndocker_image = "localhost/svc/python:3.11"\nworkdir = "/srv/w"\n'
                                    'build_timeout_sec = 90\n\n[environment.env]\nE = "1"\n\n[solution.env]\nS = "2"\n\n'
                                    '[verifier.env]\nV = "3"\n')
    loaded = harbor.load(task)
    doc = harbor.to_spec(loaded, oracle=True)
    spec = load_spec(harbor.spec_yaml(loaded, oracle=True, keep_agent_processes=True), "t.yaml")
    script = doc["agent"]["args"][1]
    assert (loaded.unmapped, loaded.workdir, spec.agent.keep_running, spec.agent.env,
            script.splitlines()[-2:], "base64 -d | tar -xzf - -C /solution" in script) == (
        [], "/srv/w", True, {"E": "1", "DEBIAN_FRONTEND": "noninteractive", "S": "2"},
        ["wd=/srv/w; export wd", 'cd "$wd" && exec /solution/solve.sh'], True)
    command = doc["invariants"]["reward"]["check"]["command"]
    assert (doc["invariants"]["reward"]["check"]["type"], "export E=1; export V=3; wd=/srv/w; export wd; cd \"$wd\" && exec /tests/test.sh" in command,
            "org/t" in doc["description"]) == ("custom", True, True)


def test_the_agents_processes_are_stopped_before_the_verifier_unless_asked_and_the_build_timeout_is_the_builds(tmp_path):
    doc = harbor.to_spec(harbor.load(TASKS / "fix-median"), agent={"type": "cli", "binary": "true"})
    spec = load_spec(harbor.spec_yaml(harbor.load(TASKS / "fix-median"), agent={"type": "cli", "binary": "true"}), "t.yaml")
    assert (doc["agent"]["keep_running"], spec.base.build.timeout) == (False, 600.0)


def test_the_final_stage_workdir_is_the_tasks(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "environment" / "Dockerfile").write_text("FROM x AS build\nWORKDIR /src\nFROM localhost/svc/python:3.11\n")
    assert harbor.load(task).workdir == "/app"


def test_tasks_run_names_agents_and_an_installed_one_gets_its_key_from_the_environment_only(tmp_path):
    assert harbor.agent_from_flag("oracle") == (None, {})
    assert harbor.agent_from_flag("cli:echo hi") == ({"type": "cli", "binary": "sh", "args": ["-c", "echo hi"]}, {})
    agent, trusted = harbor.agent_from_flag("installed:claude-code@2.1.332", model="claude-sonnet-4-5")
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    spec = load_spec(harbor.spec_yaml(harbor.load(task), agent=agent, trusted=trusted), "t.yaml")
    assert (spec.agent.type, spec.agent.version, dict(spec.secrets), list(spec.models.providers)) == (
        "installed", "2.1.332", {"ANTHROPIC_API_KEY": "env"}, ["anthropic"])
    for bad in ("installed:claude-code", "installed:nope@1", "cli:", "docker:x"):
        with pytest.raises(harbor.TaskError, match="--agent"):
            harbor.agent_from_flag(bad, model="m")


def test_eval_run_on_a_task_directory_without_oracle_recommends_a_command_that_exists(tmp_path):
    import argparse
    import asyncio

    from client.cli import build_parser
    from client.commands.tasks import run_task_dir
    from client.console import CliError

    task = tmp_path / "hello-world"
    shutil.copytree(TASKS / "hello-world", task)
    args = argparse.Namespace(spec=str(task), oracle=None, name=None, keep_agent_processes=False)
    with pytest.raises(CliError) as caught:
        asyncio.run(run_task_dir(args, None, None))
    command = str(caught.value).split("`")[1]
    assert command == f"svc tasks run {task} --agent AGENT", caught.value
    parsed = build_parser().parse_args([*command.split()[1:-1], "oracle"])
    assert (parsed.func.__name__, parsed.paths, parsed.agent) == ("tasks_run", [str(task)], "oracle")


def test_every_mapped_key_has_its_line_in_the_compatibility_table():
    assert set(harbor.MAPPED_TOML) == set(harbor.KEY_DOCS) and not set(harbor.KEY_DOCS) & set(harbor.UNMAPPED_DOCS)
