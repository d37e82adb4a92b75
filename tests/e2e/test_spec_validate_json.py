"""`svc spec validate`: --json (every problem with its YAML path, line and column, for editors' problem
matchers) and the check for `{{ name }}` prompt placeholders that task.inputs and the matrix leave
unfilled (the agent would get the literal text). The real CLI as a subprocess, offline."""
from __future__ import annotations

import json

from tests.support.procs import ROOT, run_svc

SPEC = """\
version: 1
id: placeholders
base: localhost/svc/python:3.11
task:
  prompt: |
    Fix the bug in {{ module }}.
    Use {{ c }} and {{lang}}.
  inputs: {lang: python}
agent: {type: cli, binary: sh, args: ["-c", "true"]}
parallelism:
  matrix:
MATRIX
invariants:
  ok:
    check: {type: file_exists, path: out.txt}
"""


def write(tmp_path, matrix: str):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("MATRIX", matrix))
    return path


def test_a_placeholder_nothing_fills_is_an_error_at_its_line_and_column(home, tmp_path):
    spec = write(tmp_path, "    - {module: a.py}\n    - {module: b.py, c: x}")
    result = run_svc(home, "spec", "validate", str(spec), "--json")
    assert result.returncode == 1, result.stderr
    [report] = json.loads(result.stdout)
    assert report["file"] == str(spec) and report["ok"] is False and report["spec_id"] == "placeholders"
    assert report["errors"] == [{
        "loc": "task.prompt", "line": 7, "column": 9,
        "msg": "{{ c }} is not filled by matrix entry 0: the agent would get the literal text"
               " (add c to task.inputs or to every parallelism.matrix entry)"}]
    human = run_svc(home, "spec", "validate", str(spec))
    assert human.returncode == 1 and f"{spec}:7 task.prompt: {{{{ c }}}} is not filled by matrix entry 0" in human.stderr
    assert not human.stdout


def test_every_placeholder_filled_is_ok(home, tmp_path):
    spec = write(tmp_path, "    - {module: a.py, c: x}\n    - {module: b.py, c: y}")
    result = run_svc(home, "spec", "validate", str(spec), "--json")
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout) == [{"file": str(spec), "ok": True, "spec_id": "placeholders", "invariants": 1,
                                          "runs": 2, "errors": []}]


def test_json_schema_errors_carry_line_and_column(home):
    broken = ROOT / "examples" / "broken.yaml"
    result = run_svc(home, "spec", "validate", str(broken), str(ROOT / "examples" / "quickstart.yaml"), "--json")
    assert result.returncode == 1
    bad, good = json.loads(result.stdout)
    assert good["ok"] is True and bad["ok"] is False
    timout = next(e for e in bad["errors"] if e["loc"] == "agent.timout")
    line = broken.read_text().splitlines()[timout["line"] - 1]
    assert line[timout["column"] - 1:].startswith("timout"), (line, timout)
