"""`agent: {type: snapshot, snapshot: NAME, source: DIR}` through the real `svc eval run` (a subprocess)
against a real daemon and engine: the directory is uploaded when its content changed and not
otherwise; a spec naming a snapshot that does not exist ends in error and stderr says why
(`agent_unavailable`), in the table and with --json."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.procs import ROOT
from tests.support.procs import svc_cli as _svc_cli
from tests.support.images import PYTHON
from tests.support.specs import FROM_SOURCE_SPEC

pytestmark = pytest.mark.docker

async def svc_cli(daemon, *args: str, cwd: Path):
    """The checkout's CLI run from the user's project directory (not the venv's installed copy)."""
    return await _svc_cli(daemon, *args, cwd=cwd, PYTHONPATH=str(ROOT))


def project(root: Path, answer: str) -> Path:
    (root / "my-agent").mkdir(exist_ok=True)
    (root / "my-agent" / "agent.py").write_text(f"open('/workspace/out.txt', 'w').write({answer!r})\n")
    spec = root / "my-eval.yaml"
    spec.write_text(FROM_SOURCE_SPEC)
    return spec


async def versions(daemon) -> list[int]:
    _, listed = await daemon.get("/v1/agents/my-agent/versions")
    return sorted(v["version"] for v in (listed["items"] if isinstance(listed, dict) else listed))


async def test_eval_run_uploads_the_source_when_it_changed(daemon, stock_images, tmp_path):
    spec = project(tmp_path, "bad")
    code, out, err = await svc_cli(daemon, "eval", "run", str(spec), "--json", cwd=tmp_path)
    assert code == 1 and [s["verdict"] for s in json.loads(out)["scenarios"]] == ["fail"], err
    assert "uploaded agent my-agent version 1" in err
    code, out, err = await svc_cli(daemon, "eval", "run", str(spec), "--json", cwd=tmp_path)  # nothing changed
    assert code == 1 and "agent my-agent version 1 is up to date with its source" in err, err
    assert await versions(daemon) == [1]
    project(tmp_path, "good")
    code, out, err = await svc_cli(daemon, "eval", "run", str(spec), "--json", cwd=tmp_path)
    assert code == 0 and [s["verdict"] for s in json.loads(out)["scenarios"]] == ["pass"], err
    assert "uploaded agent my-agent version 2" in err and await versions(daemon) == [1, 2]


async def test_a_source_without_an_entrypoint_or_a_first_version_is_refused_before_anything_runs(daemon, tmp_path):
    spec = project(tmp_path, "good")
    spec.write_text(FROM_SOURCE_SPEC.replace("  entrypoint: [python3, agent.py]\n", ""))
    code, _, err = await svc_cli(daemon, "eval", "run", str(spec), cwd=tmp_path)
    assert code != 0 and "has no snapshot yet to take an entrypoint from" in err, err
    _, listed = await daemon.get("/v1/experiments")
    assert listed["items"] == [], listed


MISSING = f"""\
version: 1
id: missing-agent
base: {PYTHON}
task: {{prompt: anything}}
agent: {{type: snapshot, snapshot: never-uploaded, timeout: 30s}}
invariants:
  answer:
    check: {{type: file_exists, path: out.txt}}
"""


@pytest.mark.parametrize("json_flag", [False, True])
async def test_an_error_verdict_names_its_reason_on_stderr(daemon, stock_images, tmp_path, json_flag):
    spec = tmp_path / "my-eval.yaml"
    spec.write_text(MISSING)
    code, out, err = await svc_cli(daemon, "eval", "run", str(spec), *(["--json"] if json_flag else []), cwd=tmp_path)
    assert code == 1, err
    if json_flag:
        results = json.loads(out)
        assert [r["reason"] for r in results["scenarios"][0]["runs"]] == ["agent_unavailable"]
    else:
        lines = err.splitlines()
        header, row = (re.split(r"\s{2,}", line) for line in lines[lines.index(next(x for x in lines if x.startswith("SCENARIO"))):][:2])
        assert dict(zip(header, row))["VERDICT"] == "error" and dict(zip(header, row))["REASON"] == "agent_unavailable", err
    assert "error: agent_unavailable: no agent snapshot named 'never-uploaded'" in err, err
