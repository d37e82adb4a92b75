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


def test_a_workdir_under_workspace_is_not_moved_and_its_hidden_files_are_named(tmp_path):
    task = tmp_path / "t"
    shutil.copytree(TASKS / "hello-world", task)
    (task / "environment" / "Dockerfile").write_text("FROM localhost/svc/python:3.11\nWORKDIR /workspace\n")
    loaded = harbor.load(task)
    assert (harbor.setup_command(loaded), [n.split(":")[0] for n in loaded.unmapped]) == (
        "mkdir -p /tests /logs/verifier /logs/agent /workspace", ["WORKDIR /workspace"])
