"""The CI job of docs/tutorials/gate-ci.md runs as written in a user's repository: the agent and spec of
evaluate-your-agent.md in an empty directory, the page's `sh` block under "A CI job" as one bash
script with GitHub's variables set, a fresh daemon home (no snapshot in it), the checkout's `svc` on
PATH, and something else already listening on svcd's default port 7878. Real Docker engine; the workflow
shown on the page is checked to run that same block."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.homes import short_home

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorials" / "gate-ci.md"
FIRST = ROOT / "docs" / "tutorials" / "evaluate-your-agent.md"


def ci_section() -> str:
    text = PAGE.read_text()
    return text[text.index("## A CI job"):text.index("## Against a baseline")]


def ci_script() -> str:
    return re.findall(r"^```sh\n(.*?)^```", ci_section(), re.S | re.M)[0]


def heredoc(tag: str) -> str:
    return re.findall(rf"<<'{tag}'\n(.*?)^{tag}$", FIRST.read_text(), re.S | re.M)[0]


def test_the_workflow_on_the_page_runs_the_job_shown_in_the_users_paths():
    workflow = yaml.safe_load(re.findall(r"^```yaml\n(.*?)^```", ci_section(), re.S | re.M)[0])
    steps = workflow["jobs"]["eval"]["steps"]
    install = next(s["run"] for s in steps if s.get("name", "").startswith("Install svc"))
    assert "pipx install \"$SVC_SOURCE\"" in install and "pip install ." not in install
    run = next(s["run"] for s in steps if s.get("name") == "Evaluate the agent").replace("\\\n", "")
    shown = [line.split("#")[0].strip() for line in ci_script().splitlines()]
    for line in run.splitlines():
        assert " ".join(line.split()) in [" ".join(x.split()) for x in shown], line
    assert workflow["jobs"]["eval"]["env"]["SERVICE_PORT"] == "0"


@pytest.mark.docker
def test_the_ci_job_runs_as_written_in_a_users_repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / "my-agent").mkdir(parents=True)
    (repo / "my-agent" / "agent.py").write_text(heredoc("PY"))
    (repo / "my-eval.yaml").write_text(heredoc("YAML"))
    bindir = tmp_path / "bin"  # the checkout's svc, as `pipx install` puts an `svc` on PATH
    bindir.mkdir()
    (bindir / "svc").write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m client.cli \"$@\"\n")
    (bindir / "svc").chmod(0o755)
    home = short_home("svc-ci-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERVICE_", "PYTHONPATH"))}
    env.update(PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}", GITHUB_SHA="0123abc", SERVICE_NO_AUTO_UPDATE="1",
               GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"))
    taken = socket.socket()  # another daemon (or anything) on svcd's default port
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        taken.bind(("127.0.0.1", 7878))
        taken.listen()
    except OSError:
        pass  # already taken by something else: the same situation
    script = "set -euo pipefail\n" + ci_script().replace('"$PWD/.svc-home/ci"', f'"{home}"')  # AF_UNIX paths are short
    try:
        done = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    finally:
        taken.close()
        subprocess.run([str(bindir / "svc"), "daemon", "stop"], env={**env, "SERVICE_HOME": str(home)}, capture_output=True,
                       timeout=120)
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    import json

    results = json.loads((repo / "results.json").read_text())
    assert results["name"] == "ci-0123abc" and results["status"] == "completed"
    assert {s["verdict"] for s in results["scenarios"]} == {"pass"}
    assert (repo / "report.xml").exists() and (tmp_path / "summary.md").read_text().strip()
