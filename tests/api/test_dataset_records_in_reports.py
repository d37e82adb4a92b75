"""A dataset scenario carries its record (input and expected) in RunResults, and the JUnit report
says which input failed, without a second lookup."""
from __future__ import annotations

import pytest

from client import reports
from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from tests.support.api import api_on, make_settings
from tests.support.dataset_runner import DatasetRunner, spec_yaml
from tests.support.experiments import wait_done

RECORDS = [
    {"input": {"question": "2+2", "answer": "4"}, "expected": {"answer": "4"}},
    {"input": {"question": "3*3", "answer": "6"}, "expected": {"answer": "9"}},
]


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    app = create_app(make_settings(tmp_path / "home"))
    app[RUN_SCENARIO] = DatasetRunner()
    return await api_on(aiohttp_client, app)


async def run_over_a_dataset(api) -> dict:
    response, created = await api.post("/v1/datasets", json={"name": "qa"})
    assert response.status == 201, created
    response, added = await api.post(f"/v1/datasets/{created['id']}/records", json=RECORDS)
    assert response.status == 201, added
    await api.upload_yaml(spec_yaml(created["id"]))
    response, experiment = await api.post("/v1/experiments", json={"spec_id": "qa"})
    assert response.status == 201, experiment
    await api.post(f"/v1/experiments/{experiment['id']}/run")
    return await wait_done(api, experiment["id"])


async def test_a_failing_dataset_scenario_names_its_input_in_results_and_junit(api):
    results = await run_over_a_dataset(api)
    records = [s["record"] for s in results["scenarios"]]
    failing = next(s for s in results["scenarios"] if not s["passed"])
    xml = reports.junit(results).decode()
    assert [(r["input"], r["expected"]) for r in records] == [(r["input"], r["expected"]) for r in RECORDS]
    assert failing["record"]["input"] == {"question": "3*3", "answer": "6"} and 'input: {"answer": "6", "question": "3*3"}' in xml
