"""An experiment over a dataset on the real engine: the agent echoes its record's input into
answer.txt, the checks compare it with the record's `expected` (through SERVICE_EXPECTED_FILE and
through `{{ expected.answer }}`); one record's expected is deliberately wrong, so that scenario fails
and the others pass. The agent never sees expected.json."""
from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from tests.support.api import Api
from tests.support.specs import cli_spec, inv
from tests.support.dataset_runner import run_dataset_experiment

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="module")]

RECORDS = [
    {"input": {"answer": "4"}, "expected": {"answer": "4"}},
    {"input": {"answer": "Paris"}, "expected": {"answer": "Paris"}},
    {"input": {"answer": "6"}, "expected": {"answer": "9"}},  # deliberately wrong
]
AGENT = 'printf "%s" "$SERVICE_TASK_PROMPT" > answer.txt; if [ -e .svc/expected.json ]; then touch saw_expected.txt; fi'
COMPARE = ("python3 -c \"import json, os; e = json.load(open(os.environ['SERVICE_EXPECTED_FILE'])); "
           "raise SystemExit(0 if open('answer.txt').read() == e['answer'] else 1)\"")


def spec(dataset_id: str) -> dict[str, Any]:
    return cli_spec("echo-dataset", AGENT, {
        "matches_expected_file": inv({"type": "command_exit", "command": COMPARE, "expect_exit_code": 0}),
        "matches_expected_template": inv({"type": "file_content", "path": "answer.txt", "equals": "{{ expected.answer }}"}),
        "agent_never_saw_expected": inv({"type": "file_absent", "path": "saw_expected.txt"}),
    }, task={"prompt": "{{ answer }}"}, parallelism={"dataset": {"id": dataset_id}})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def results(api: Api) -> dict[str, Any]:
    return await run_dataset_experiment(api, RECORDS, spec)


def invariant(scenario: dict[str, Any], name: str) -> str:
    results = scenario["runs"][0]["invariant_results"]
    return next(r["status"] for r in results if r["invariant_id"] == name)


async def test_the_wrong_record_fails_and_the_others_pass(results):
    assert [s["verdict"] for s in results["scenarios"]] == ["pass", "pass", "fail"]


async def test_the_expected_file_check_compares_with_each_record(results):
    assert [invariant(s, "matches_expected_file") for s in results["scenarios"]] == ["passed", "passed", "failed"]


async def test_the_expected_template_check_compares_with_each_record(results):
    assert [invariant(s, "matches_expected_template") for s in results["scenarios"]] == ["passed", "passed", "failed"]


async def test_the_agent_never_sees_the_expected_file(results):
    assert {invariant(s, "agent_never_saw_expected") for s in results["scenarios"]} == {"passed"}


async def test_results_record_the_dataset_version(results):
    assert (results["dataset"]["version"], len(results["dataset"]["digest"])) == (2, 64)
