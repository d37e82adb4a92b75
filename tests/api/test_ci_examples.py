"""The commands of examples/ci/github-actions.yml and examples/ci/gitlab-ci.yml, run as the CI would
(bash, the variables the CI sets) with the real `svc` CLI against a real daemon app (the
deterministic scenario runner of tests/support/experiments.py): the evaluation, its reports, the
baseline bundle and the gate against it."""
from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.experiments import start

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A checkout with the spec, and `svc` (the CLI of this tree) and an offline `curl` on PATH."""
    work = tmp_path / "checkout"
    (work / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "quickstart.yaml", work / "examples" / "quickstart.yaml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "svc").write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m client.cli "$@"\n')
    (bin_dir / "curl").write_text("#!/bin/sh\nexit 22\n")  # nothing to download from here
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for name in ("svc", "curl", "python"):
        (bin_dir / name).chmod(0o755)
    return work


def ci_env(api, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(PATH=f"{tmp_path / 'bin'}:{env.get('PATH', '')}", SERVICE_BASE_URL=api.base_url(), SERVICE_API_KEY=api.key,
               SERVICE_NO_AUTOSTART="1", SERVICE_HOME=str(tmp_path / "client-home"), **extra)
    return env


async def bash(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script, cwd=str(cwd), env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode()


async def github_job(api, tmp_path: Path, work: Path, steps: list[dict]) -> int:
    """The `svc:` steps in order, as GitHub runs them: GITHUB_ENV carried from step to step."""
    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "github-actions.yml").read_text())
    env = ci_env(api, tmp_path, **workflow["env"], GITHUB_ENV=str(tmp_path / "github_env"),
                 GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    (tmp_path / "github_env").write_text("")
    code = 0
    for step in steps:
        code, out = await bash(step["run"], work, env)
        for line in (tmp_path / "github_env").read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value
        if code and step["name"] != "svc: gate against the baseline":
            raise AssertionError(f"{step['name']} exited {code}:\n{out}")
    return code


async def test_the_github_workflow_keeps_a_baseline_then_gates_a_pull_request_on_it(api, workdir, tmp_path):
    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "github-actions.yml").read_text())
    steps = [s for s in workflow["jobs"]["eval"]["steps"] if str(s.get("name", "")).startswith("svc:")]
    assert [s["name"] for s in steps] == ["svc: run the evaluation", "svc: gate against the baseline", "svc: keep the baseline"]
    await github_job(api, tmp_path, workdir, steps)  # main
    (workdir / "baseline").mkdir()
    shutil.move(workdir / "reports" / "bundle.json", workdir / "baseline" / "bundle.json")
    shutil.rmtree(workdir / "reports")
    code = await github_job(api, tmp_path, workdir, steps[:2])  # a pull request
    summary = (tmp_path / "summary.md").read_text()
    assert code == 0 and "gate: **no_change** vs" in summary and (workdir / "reports" / "junit.xml").exists()
    assert (workdir / "reports" / "report.html").exists() and (workdir / "reports" / "compare.html").exists()


async def test_the_gitlab_job_script_runs_reports_and_exports_its_bundle(api, workdir, tmp_path):
    job = yaml.safe_load((ROOT / "examples" / "ci" / "gitlab-ci.yml").read_text())["agent-eval"]
    env = ci_env(api, tmp_path, **job["variables"], CI_JOB_TOKEN="t", CI_API_V4_URL="http://127.0.0.1:9/api/v4", CI_PROJECT_ID="1")
    code, out = await bash("\n".join(job["script"]), workdir, env)
    reports = workdir / "reports"
    assert code == 0, out
    assert {p.name for p in reports.iterdir()} >= {"junit.xml", "summary.md", "report.html", "results.json", "bundle.json"}
