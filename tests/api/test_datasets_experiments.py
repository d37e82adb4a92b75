"""Experiments over a dataset through the real API, store and job engine (the scenario runner is
tests.support.dataset_runner): one scenario per record, inputs and expected from the record,
RunResults and history name the dataset version, compare refuses different versions."""
from __future__ import annotations

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.dataset_runner import DatasetRunner, spec_yaml
from tests.support.experiments import wait_done
from daemon.appkeys import RUN_SCENARIO

RECORDS = [
    {"input": {"question": "2+2", "answer": "4"}, "expected": {"answer": "4"}, "tags": ["math"]},
    {"input": {"question": "capital of France", "answer": "Paris"}, "expected": {"answer": "Paris"}, "tags": ["geo"]},
    {"input": {"question": "3*3", "answer": "6"}, "expected": {"answer": "9"}, "tags": ["math"]},
]


@pytest.fixture
def runner() -> DatasetRunner:
    return DatasetRunner()


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    app = create_app(make_settings(tmp_path / "home"))
    app[RUN_SCENARIO] = runner
    return await api_on(aiohttp_client, app)


async def dataset(api, records=RECORDS) -> str:
    response, body = await api.post("/v1/datasets", json={"name": "qa"})
    assert response.status == 201, body
    response, added = await api.post(f"/v1/datasets/{body['id']}/records", json=records)
    assert response.status == 201, added
    return body["id"]


async def experiment(api, dataset_id: str, extra: str = "", matrix: str = "", run: bool = True) -> dict:
    await api.upload_yaml(spec_yaml(dataset_id, extra, matrix))
    response, created = await api.post("/v1/experiments", json={"spec_id": "qa"})
    assert response.status == 201, created
    if not run:
        return created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started
    return await wait_done(api, created["id"])


async def test_each_record_is_one_scenario_with_replicas(api):
    results = await experiment(api, await dataset(api))
    assert ([s["replicas"] for s in results["scenarios"]], results["total_runs"]) == ([2, 2, 2], 6)


async def test_the_scenario_matrix_entry_names_its_record(api):
    dataset_id = await dataset(api)
    results = await experiment(api, dataset_id)
    response, page = await api.get(f"/v1/datasets/{dataset_id}/records")
    assert [s["matrix_entry"]["record_id"] for s in results["scenarios"]] == [r["id"] for r in page["items"]]


async def test_the_wrong_record_fails_and_the_others_pass(api):
    results = await experiment(api, await dataset(api))
    assert [s["verdict"] for s in results["scenarios"]] == ["pass", "pass", "fail"]


async def test_the_record_input_fills_the_run_inputs(api, runner):
    await experiment(api, await dataset(api))
    assert sorted({c["inputs"]["question"] for c in runner.calls}) == ["2+2", "3*3", "capital of France"]


async def test_the_record_expected_reaches_the_runner(api, runner):
    await experiment(api, await dataset(api))
    assert sorted({c["dataset_record"]["expected"]["answer"] for c in runner.calls}) == ["4", "9", "Paris"]


async def test_records_cross_the_matrix(api):
    results = await experiment(api, await dataset(api), matrix="  matrix:\n    - {model: a}\n    - {model: b}\n")
    assert len({(s["matrix_entry"]["record_id"], s["matrix_entry"]["model"]) for s in results["scenarios"]}) == 6


async def test_tags_select_the_records(api):
    results = await experiment(api, await dataset(api), extra="    tags: [geo]\n")
    assert len(results["scenarios"]) == 1


async def test_run_results_name_the_dataset_version_and_digest(api):
    dataset_id = await dataset(api)
    results = await experiment(api, dataset_id)
    response, ds = await api.get(f"/v1/datasets/{dataset_id}")
    assert results["dataset"] == {"id": dataset_id, "version": 2, "digest": ds["digest"], "tags": None}


async def test_a_pinned_version_runs_that_version(api):
    dataset_id = await dataset(api)
    await api.post(f"/v1/datasets/{dataset_id}/records", json=[{"input": {"question": "new", "answer": "x"}}])
    results = await experiment(api, dataset_id, extra="    version: 2\n")
    assert (results["dataset"]["version"], len(results["scenarios"])) == (2, 3)


async def test_without_a_dataset_results_say_null(api):
    await api.upload_yaml(spec_yaml("unused").split("  dataset:")[0])
    response, created = await api.post("/v1/experiments", json={"spec_id": "qa"})
    response, results = await api.get(f"/v1/experiments/{created['id']}")
    assert results["dataset"] is None


async def test_history_shows_the_dataset_version(api):
    dataset_id = await dataset(api)
    await experiment(api, dataset_id)
    response, history = await api.get("/v1/evals/qa/history")
    assert history["items"][0]["dataset"]["version"] == 2


async def test_compare_refuses_different_dataset_versions(api):
    dataset_id = await dataset(api)
    first = await experiment(api, dataset_id)
    await api.post(f"/v1/datasets/{dataset_id}/records", json=[{"input": {"question": "new", "answer": "x"}}])
    second = await experiment(api, dataset_id)
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": first["id"], "candidate_id": second["id"]})
    assert (response.status, body["details"]["state"]) == (409, "dataset_version_mismatch")


async def test_compare_accepts_the_same_dataset_version(api):
    dataset_id = await dataset(api)
    first = await experiment(api, dataset_id)
    second = await experiment(api, dataset_id)
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": first["id"], "candidate_id": second["id"]})
    assert response.status == 200, body


async def test_rerunning_failures_keeps_the_dataset_version(api):
    dataset_id = await dataset(api)
    first = await experiment(api, dataset_id)
    response, created = await api.post("/v1/experiments", json={"spec_id": "qa", "filter_failing_from": first["id"]})
    assert (created["total_runs"], (await api.get(f"/v1/experiments/{created['id']}"))[1]["dataset"]["version"]) == (2, 2)


async def test_an_unknown_dataset_is_404_naming_the_spec_path(api):
    await api.upload_yaml(spec_yaml("ds_missing"))
    response, body = await api.post("/v1/experiments", json={"spec_id": "qa"})
    assert (response.status, body["message"].split(":")[0]) == (404, "parallelism.dataset.id")


async def test_another_tenants_dataset_is_refused(api, other_tenant_key):
    dataset_id = await dataset(api)
    await api.upload_yaml(spec_yaml(dataset_id), key=other_tenant_key)
    response, body = await api.post("/v1/experiments", json={"spec_id": "qa"}, key=other_tenant_key)
    assert response.status == 403


async def test_an_empty_dataset_version_is_refused(api):
    response, body = await api.post("/v1/datasets", json={"name": "empty"})
    await api.upload_yaml(spec_yaml(body["id"]))
    response, body = await api.post("/v1/experiments", json={"spec_id": "qa"})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "parallelism.dataset")


async def test_a_deleted_dataset_errors_the_scenarios_naming_the_record(api):
    dataset_id = await dataset(api)
    created = await experiment(api, dataset_id, run=False)
    await api.delete(f"/v1/datasets/{dataset_id}")
    await api.post(f"/v1/experiments/{created['id']}/run")
    results = await wait_done(api, created["id"])
    assert "no longer exists" in results["scenarios"][0]["errors"][0]


def test_expected_placeholders_fill_check_parameters():
    from daemon.scoring.checks.expected import render_expected
    from daemon.spec.checks import FileContentCheck

    check = FileContentCheck(type="file_content", path="out/{{ expected.name }}.txt", equals="{{ expected.answer.value }}")
    rendered = render_expected(check, {"name": "a", "answer": {"value": 42}})
    assert (rendered.path, rendered.equals) == ("out/a.txt", "42")


def test_an_unknown_expected_key_stays_as_written():
    from daemon.scoring.checks.expected import render_text

    assert render_text("{{ expected.nope }}", {"answer": 1}) == "{{ expected.nope }}"


async def test_dataset_version_in_the_request_picks_the_version(api):
    dataset_id = await dataset(api)
    await api.post(f"/v1/datasets/{dataset_id}/records", json=[{"input": {"question": "new", "answer": "x"}}])
    await api.upload_yaml(spec_yaml(dataset_id))
    response, created = await api.post("/v1/experiments", json={"spec_id": "qa", "dataset_version": 2})
    assert created["total_runs"] == 6


async def test_dataset_version_without_a_dataset_is_refused(api):
    await api.upload_yaml(spec_yaml("unused").split("  dataset:")[0])
    response, body = await api.post("/v1/experiments", json={"spec_id": "qa", "dataset_version": 2})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "dataset_version")
