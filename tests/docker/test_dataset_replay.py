"""Replaying a dataset scenario on the real engine: each scenario's reproducer, pasted into the real
CLI as a standalone run, reads its record again (input and expected), so a failing record fails
again and a passing one passes again."""
from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from tests.support.api import Api
from tests.support.runs import replay_with_cli
from tests.support.specs import cli_spec, inv
from tests.support.dataset_runner import run_dataset_experiment

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="module")]

RECORDS = [
    {"input": {"answer": "4"}, "expected": {"answer": "4"}},
    {"input": {"answer": "6"}, "expected": {"answer": "9"}},  # deliberately wrong
]
AGENT = 'printf "%s" "$SERVICE_TASK_PROMPT" > answer.txt'


def spec(dataset_id: str) -> dict[str, Any]:
    return cli_spec("echo-replay", AGENT, {
        "matches_expected": inv({"type": "file_content", "path": "answer.txt", "equals": "{{ expected.answer }}"}),
    }, task={"prompt": "{{ answer }}"}, parallelism={"dataset": {"id": dataset_id}})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def results(api: Api) -> dict[str, Any]:
    return await run_dataset_experiment(api, RECORDS, spec)


def scenario(results: dict[str, Any], verdict: str) -> dict[str, Any]:
    return next(s for s in results["scenarios"] if s["verdict"] == verdict)


async def test_the_failing_records_reproducer_fails_again(api, results):
    code, replayed = await replay_with_cli(api, scenario(results, "fail"))
    assert (code, replayed["status"]) == (1, "failed")


async def test_a_passing_records_reproducer_passes_again(api, results):
    code, replayed = await replay_with_cli(api, scenario(results, "pass"))
    assert (code, replayed["status"]) == (0, "passed")


async def test_the_replay_reproducer_names_the_same_record(api, results):
    failing = scenario(results, "fail")
    _, replayed = await replay_with_cli(api, failing)
    assert replayed["reproducer"]["dataset"]["record_id"] == failing["matrix_entry"]["record_id"]


async def test_the_reproducer_names_the_dataset_version_and_record(results):
    failing = scenario(results, "fail")
    assert failing["reproducer"]["dataset"] == {
        "id": results["dataset"]["id"], "version": 2, "record_id": failing["matrix_entry"]["record_id"]}
