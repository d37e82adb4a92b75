"""Infrastructure errors are retried and counted (scoring.retries.infrastructure), spec errors are
not: a real daemon app whose scenario runner answers the run bodies the real runner gives for an
engine error during boot, for a fixture whose SQL fails and for an agent whose exec the engine lost."""
from __future__ import annotations

import json

import pytest

from daemon.appkeys import STORE
from daemon.experiments import service as experiment_service
from daemon.store import runs as run_store
from tests.support.experiments import FakeRunner, run_experiment, start, upload
from tests.support.fake_runs import fake_outcome
from tests.support.runs import Receiver
from tests.support.waiting import wait_for
from tests.support.specs import spec_yaml


class BootingRunner(FakeRunner):
    """`engine_hiccup`: the first attempt of each seed fails to boot as when the engine answered
    an error; `bad_fixture`: every attempt fails to boot at the fixtures step (a spec error)."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts: dict[str, int] = {}

    async def __call__(self, app, request):
        mode = (request.matrix_entry or {}).get("mode")
        key = f"{mode}:{request.seed}"
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if mode == "engine_hiccup" and self.attempts[key] == 1:
            return boot_failed(request, "internal", "unexpected error during boot: APIError: 500 Server Error for "
                               "http+docker://localhost/v1.43/networks/create: Internal Server Error")
        if mode == "lost_agent" and self.attempts[key] == 1:
            return await lost_agent(app, request)
        if mode == "bad_fixture":
            return boot_failed(request, "fixtures", "fixture 'seed.sql' failed: ERROR: relation \"orders\" does not exist")
        return await super().__call__(app, request.__class__(**{**request.__dict__, "matrix_entry": {"mode": "pass"}}))


async def lost_agent(app, request) -> dict:
    """The run row the real runner leaves when its connection to the engine broke while the agent
    ran (`agent_engine_lost`): no exit status, so the check found nothing and the run failed."""
    store = app[STORE]
    await run_store.insert(store, run_id=request.run_id, tenant_id=request.tenant_id, spec_id=request.spec_record["id"],
                           spec_version=request.spec_record["version"], seed=request.seed, status="running",
                           scenario_id=request.scenario_id)
    result = {"agent": {"type": "cli", "name": "sh"}, "agent_exit_code": None, "agent_engine_lost": True,
              "invariant_results": [{"invariant_id": "ok", "name": "ok", "status": "failed", "score": 0.0}]}
    await run_store.update(store, request.run_id, status="failed", verdict="fail", reason="ok", result=result)
    return fake_outcome(request, status="failed", verdict="fail", score=0.0, invariant_results=result["invariant_results"])


def boot_failed(request, step: str, message: str) -> dict:
    return fake_outcome(request, status="errored", verdict="error", reason="boot_failed",
                        error={"step": "boot", "code": "boot_failed", "message": f"sandbox failed to boot at step '{step}': {message}",
                               "sandbox_error": {"step": step, "message": message}})


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
