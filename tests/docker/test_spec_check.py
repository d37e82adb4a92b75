"""`svc spec check` against a real daemon app and real sandboxes: a spec with a check any agent
passes (vacuous), one that passes the oracle only on one seed (flaky) and one that is right (ok)
is flagged, with the runs that show it, and the command exits 1."""
from __future__ import annotations

import json

import pytest
import yaml

from client.api import Client
from client.cli import build_parser
from client.config import ClientConfig
from tests.support.images import PYTHON
from tests.support.runs import upload_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")

ORACLE = "import os\nopen('/workspace/answer.txt', 'w').write(os.environ['SERVICE_SEED'] + '\\n')\n"

SPEC = {
    "version": 1, "id": "checked", "base": PYTHON, "task": {"prompt": "write your seed to answer.txt"},
    "agent": {"type": "cli", "binary": "false", "timeout": "30s"},
    "invariants": {
        "answered": {"check": {"type": "command_exit", "command": "test -s answer.txt", "expect_exit_code": 0}},
        "anything": {"check": {"type": "command_exit", "command": "true", "expect_exit_code": 0}},
        "first_seed": {"check": {"type": "command_exit", "command": "grep -qx spec-check-0 answer.txt", "expect_exit_code": 0}},
    },
    "resources": {"timeout": "2m"},
}


async def run_cli(api, home, *argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    config = ClientConfig(base_url=api.base_url(), api_key=api.key, timeout=30, home=home, api_key_source="flag")
    async with Client(config) as client:
        return await args.func(args, client)


async def test_a_vacuous_and_a_flaky_check_are_flagged(api, tmp_path, capsys):
    (tmp_path / "oracle").mkdir()
    (tmp_path / "oracle" / "solve.py").write_text(ORACLE)
    await upload_agent(api, "seed-oracle", tmp_path / "oracle", ["python3", "solve.py"])
    spec = tmp_path / "checked.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    code = await run_cli(api, tmp_path, "spec", "check", str(spec), "--oracle", "seed-oracle", "-n", "2")
    report = json.loads(capsys.readouterr().out)
    verdicts = {c["check"]: (c["verdict"], sorted(c["shown_by"])) for c in report["checks"]}
    assert (code, verdicts) == (1, {"answered": ("ok", []), "anything": ("vacuous", ["passed_noop"]),
                                    "first_seed": ("flaky", ["failed_oracle", "passed_oracle"])}), report


async def test_eval_run_check_spec_stops_before_the_experiment(api, tmp_path, capsys):
    """A spec whose check passes the noop: `svc eval run --check-spec` exits 1 and creates no experiment."""
    (tmp_path / "oracle").mkdir()
    (tmp_path / "oracle" / "solve.py").write_text(ORACLE)
    await upload_agent(api, "seed-oracle-eval", tmp_path / "oracle", ["python3", "solve.py"])
    vacuous = {**SPEC, "id": "checked-eval", "invariants": {"anything": SPEC["invariants"]["anything"]}}
    spec = tmp_path / "checked-eval.yaml"
    spec.write_text(yaml.safe_dump(vacuous))
    code = await run_cli(api, tmp_path, "eval", "run", str(spec), "--check-spec", "--oracle", "seed-oracle-eval",
                         "--check-runs", "1")
    response, experiments = await api.get("/v1/experiments?spec_id=checked-eval")
    assert (code, response.status, experiments["items"], "anything: VACUOUS" in capsys.readouterr().err) == \
        (1, 200, [], True), experiments


async def test_a_harbor_task_is_checked_with_its_own_solution(api, tmp_path, capsys):
    """A Harbor task directory needs no --oracle: its solution/solve.sh is the oracle; a verifier
    that rewards only the solution's answer is ok, and the command exits 0."""
    task = tmp_path / "answer-task"
    for sub in ("tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text(f'version = "1.0"\n[environment]\ndocker_image = "{PYTHON}"\n')
    (task / "instruction.md").write_text("Write 42 to /tmp/answer.txt.\n")
    (task / "solution" / "solve.sh").write_text("echo 42 > /tmp/answer.txt\n")
    (task / "tests" / "test.sh").write_text(
        "mkdir -p /logs/verifier\nif grep -qx 42 /tmp/answer.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
    code = await run_cli(api, tmp_path, "spec", "check", str(task), "-n", "1")
    report = json.loads(capsys.readouterr().out)
    assert (code, report["oracle"], [(c["check"], c["verdict"]) for c in report["checks"]]) == \
        (0, "solution/solve.sh", [("reward", "ok")]), report
