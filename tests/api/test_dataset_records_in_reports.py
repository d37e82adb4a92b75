"""A dataset scenario carries its record (input and expected) in RunResults, and the JUnit report
says which input failed, without a second lookup."""
from __future__ import annotations

import pytest

from client import reports
from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from tests.api.test_datasets_experiments import RECORDS, dataset, experiment
from tests.support.api import api_on, make_settings
from tests.support.dataset_runner import DatasetRunner


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    app = create_app(make_settings(tmp_path / "home"))
    app[RUN_SCENARIO] = DatasetRunner()
    return await api_on(aiohttp_client, app)


async def test_a_failing_dataset_scenario_names_its_input_in_results_and_junit(api):
    results = await experiment(api, await dataset(api))
    records = [s["record"] for s in results["scenarios"]]
    failing = next(s for s in results["scenarios"] if not s["passed"])
    xml = reports.junit(results).decode()
    assert [(r["input"], r["expected"]) for r in records] == [(r["input"], r["expected"]) for r in RECORDS]
    assert failing["record"]["input"] == {"question": "3*3", "answer": "6"} and 'input: {"answer": "6", "question": "3*3"}' in xml
