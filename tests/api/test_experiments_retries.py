"""Infrastructure errors are retried and counted (scoring.retries.infrastructure), spec errors are
not: a real daemon app whose scenario runner answers the run bodies the real runner gives for an
engine error during boot, for a fixture whose SQL fails and for an agent whose exec the engine lost."""
from __future__ import annotations

import json

import pytest

from daemon.experiments import service as experiment_service
from tests.support.experiments import run_experiment, start, upload
from tests.support.retries import BootingRunner
from tests.support.runs import Receiver
from tests.support.waiting import wait_for
from tests.support.specs import spec_yaml


@pytest.fixture
def booting() -> BootingRunner:
    return BootingRunner()


@pytest.fixture
async def api(aiohttp_client, tmp_path, booting, monkeypatch):
    monkeypatch.setattr(experiment_service, "INFRA_RETRY_S", 0.01)
    monkeypatch.setattr(experiment_service, "ENGINE_WAIT_S", 1.0)
    return await start(aiohttp_client, tmp_path / "home", booting)


async def test_an_engine_error_during_boot_is_retried_and_the_retry_is_shown(api, booting):
    await upload(api, spec_yaml("hiccup", matrix=[{"mode": "engine_hiccup"}], replicas=2))
    results = await run_experiment(api, name="hiccup", spec_id="hiccup")
    [scenario] = results["scenarios"]
    first_attempts = [r["previous_run_ids"] for r in scenario["runs"]]
    assert scenario["verdict"] == "pass" and results["status"] == "completed"
    assert [len(p) for p in first_attempts] == [1, 1] and scenario["retried_runs"] == 2 and results["metrics"]["retried_runs"] == 2
    assert all(r["run_id"] not in p for r, p in zip(scenario["runs"], first_attempts))


async def test_a_workspace_the_host_could_not_make_is_retried(api, booting):
    await upload(api, spec_yaml("full", matrix=[{"mode": "full_disk"}], replicas=2))
    results = await run_experiment(api, name="full", spec_id="full")
    [scenario] = results["scenarios"]
    assert (scenario["verdict"], scenario["retried_runs"]) == ("pass", 2)


async def test_a_fixture_sql_error_is_not_retried(api, booting):
    await upload(api, spec_yaml("fixture", matrix=[{"mode": "bad_fixture"}], replicas=2))
    results = await run_experiment(api, name="fixture", spec_id="fixture")
    [scenario] = results["scenarios"]
    assert scenario["verdict"] == "error" and scenario["retried_runs"] == 0 and sorted(booting.attempts.values()) == [1, 1]


async def test_a_run_whose_agent_the_engine_lost_is_an_infrastructure_error_never_a_failure(api, booting):
    await upload(api, spec_yaml("lost", matrix=[{"mode": "lost_agent"}]))
    results = await run_experiment(api, name="lost", spec_id="lost")
    [scenario] = results["scenarios"]
    [replica] = scenario["runs"]
    response, first = await api.get(f"/v1/runs/{replica['previous_run_ids'][0]}")
    assert scenario["verdict"] == "pass" and scenario["failed_runs"] == 0
    assert (first["status"], first["verdict"], first["reason"]) == ("errored", "error", "infrastructure_error")


async def test_the_run_completed_webhook_says_what_the_stored_run_says_after_an_infrastructure_retry(api, booting):
    receiver = await Receiver().start()
    try:
        response, hook = await api.post("/v1/webhooks", json={"url": receiver.url, "events": ["run.completed"]})
        assert response.status == 201, hook
        await upload(api, spec_yaml("lost-hook", matrix=[{"mode": "lost_agent"}]))
        results = await run_experiment(api, name="lost-hook", spec_id="lost-hook")
        [replica] = results["scenarios"][0]["runs"]
        first_id = replica["previous_run_ids"][0]

        async def sent_for_first():
            for call in receiver.calls:
                body = json.loads(call["body"])
                if body["id"] == first_id:
                    return body
            return None

        sent = await wait_for(sent_for_first, timeout=10, what="the webhook of the retried attempt")
        _, stored = await api.get(f"/v1/runs/{first_id}")
        assert (sent["status"], sent["reason"]) == (stored["status"], stored["reason"]) == ("errored", "infrastructure_error")
    finally:
        await receiver.stop()
