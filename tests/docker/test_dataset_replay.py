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
from tests.support.waiting import wait_for

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
    response, dataset = await api.post("/v1/datasets", json={"name": "echo"})
    assert response.status == 201, dataset
    response, added = await api.post(f"/v1/datasets/{dataset['id']}/records", json=RECORDS)
    assert response.status == 201, added
    await api.upload_doc(spec(dataset["id"]))
    response, created = await api.post("/v1/experiments", json={"spec_id": "echo-replay"})
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started

    async def finished():
        _, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None
    return await wait_for(finished, timeout=300, what="the experiment to finish", interval=0.5)


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
