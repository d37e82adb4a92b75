"""The experiment results are strict contract answers: RunResults (and its scenarios, replicas,
reproducers, metrics), the scenarios listing, the metrics answer and the comparison carry exactly the
keys their models declare, every one of them required, and a key the daemon adds without declaring
it fails the answer instead of passing unchecked."""
from __future__ import annotations

import pytest

from daemon.contract.experiments import (
    ChangedScenario,
    ComparisonResult,
    ExperimentMetrics,
    MetricComparison,
    ReplicaRun,
    RunResults,
    RunResultsMetrics,
    ScenarioReproducer,
    ScenarioResult,
)
from daemon.experiments.service import ExperimentService
from tests.support.experiments import base_seed_for, run_experiment, start, upload
from tests.support.specs import spec_yaml


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


def keys(model) -> set[str]:
    return set(model.model_fields)


async def test_results_answers_carry_exactly_their_declared_keys(api):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "odd"}], replicas=2))
    before = await run_experiment(api, name="before", spec_id="demo", seed=base_seed_for([False, False], 1))
    after = await run_experiment(api, name="after", spec_id="demo", seed=base_seed_for([False, True], 1))

    response, results = await api.get(f"/v1/experiments/{after['id']}")
    assert response.status == 200
    assert set(results) == keys(RunResults)
    assert set(results["metrics"]) == keys(RunResultsMetrics)
    for scenario in results["scenarios"]:
        assert set(scenario) == keys(ScenarioResult)
        assert set(scenario["reproducer"]) == keys(ScenarioReproducer)
        for replica in scenario["runs"]:
            assert set(replica) == keys(ReplicaRun)

    response, page = await api.get("/v1/scenarios", params={"experiment_id": after["id"]})
    assert response.status == 200 and page["items"] and all(set(s) == keys(ScenarioResult) for s in page["items"])

    response, metrics = await api.get(f"/v1/metrics/experiments/{after['id']}")
    assert response.status == 200 and set(metrics) == keys(ExperimentMetrics)

    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": before["id"], "candidate_id": after["id"]})
    assert response.status == 200 and set(result) == keys(ComparisonResult)
    assert all(set(m) == keys(MetricComparison) for m in result["metrics"])
    assert result["changed_scenarios"] and all(set(c) == keys(ChangedScenario) for c in result["changed_scenarios"])


async def test_the_openapi_document_describes_run_results_exactly(api):
    response, doc = await api.get("/v1/openapi.json")
    schemas = doc["components"]["schemas"]
    for name, model in (("RunResults", RunResults), ("ScenarioResult", ScenarioResult), ("ReplicaRun", ReplicaRun),
                        ("ComparisonResult", ComparisonResult), ("ExperimentMetrics", ExperimentMetrics)):
        schema = schemas[name]
        assert schema["additionalProperties"] is False, name
        assert set(schema["properties"]) == keys(model) == set(schema["required"]), name


async def test_an_undeclared_key_fails_the_answer(api, monkeypatch):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}], replicas=1))
    results = await run_experiment(api, name="one", spec_id="demo")
    real = ExperimentService.run_results

    async def drifted(service, row):
        body = await real(service, row)
        body["scenarios"][0]["runs"][0]["undeclared"] = 1
        return body

    monkeypatch.setattr(ExperimentService, "run_results", drifted)
    response, body = await api.get(f"/v1/experiments/{results['id']}")
    assert response.status == 500
    assert "undeclared" in str(body)
