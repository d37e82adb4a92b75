"""Finding 5 (fairness): one tenant's long runs could hold every slot of the engine, and one
scoring job ran at a time for all tenants, so a tenant's slow scoring held back everyone's. Now a
tenant has at most SERVICE_MAX_RUNNING_PER_TENANT jobs running (the rest stay queued, never
refused) and scoring runs one job at a time per tenant."""
from __future__ import annotations

import asyncio

import pytest

from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from daemon.config import Settings
from daemon.scores.scorers import Scorers
from tests.support.api import Api, api_on, make_settings
from tests.support.experiments import wait_done
from tests.support.scores import add_llm_spans, create_rule, finished_experiment, wait_job
from tests.support.specs import spec_yaml
from tests.support.waiting import wait_for


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner, monkeypatch):
    monkeypatch.setenv("SERVICE_MAX_CONCURRENT_RUNS", "4")  # the same four slots whatever this machine's cpu count
    app = create_app(make_settings(tmp_path / "home", max_running_per_tenant=2))
    app[RUN_SCENARIO] = runner
    return await api_on(aiohttp_client, app)


async def start_experiment(api, spec_id: str, key: str | None = None) -> str:
    response, created = await api.post("/v1/experiments", json={"spec_id": spec_id}, key=key)
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run", key=key)
    assert response.status == 202, started
    return created["id"]


async def test_a_tenants_long_runs_do_not_starve_another_tenant(api, runner, other_tenant_key):
    await api.upload_yaml(spec_yaml("long", matrix=[{"mode": "block"}], replicas=8))  # tenant A: 8 runs that never end
    await api.upload_yaml(spec_yaml("quick", matrix=[{"mode": "pass"}], replicas=1), key=other_tenant_key)
    hog = await start_experiment(api, "long")
    await wait_for(lambda: runner.running >= 2, what="tenant A's runs to start")
    quick = await start_experiment(api, "quick", key=other_tenant_key)
    done = await wait_done(Api(api.client, other_tenant_key, api.home), quick)
    assert done["status"] == "completed"  # while every one of A's runs is still blocked
    runner.release.set()
    await wait_done(api, hog)


async def test_a_tenant_over_its_cap_is_queued_not_refused(api, runner, other_tenant_key):
    await api.upload_yaml(spec_yaml("long", matrix=[{"mode": "block"}], replicas=6))
    hog = await start_experiment(api, "long")
    await wait_for(lambda: runner.running >= 2, what="tenant A's runs to start")
    await asyncio.sleep(0.2)  # give the scheduler every chance to start more than the cap
    response, body = await api.get(f"/v1/experiments/{hog}")
    assert (runner.running, body["status"]) == (2, "running")
    runner.release.set()
    assert (await wait_done(api, hog))["completed_runs"] == 6


async def test_a_lone_tenant_may_use_every_slot(api, runner):
    """The cap keeps room for other tenants: with none (one user's daemon), one tenant uses all four."""
    await api.upload_yaml(spec_yaml("long", matrix=[{"mode": "block"}], replicas=6))
    hog = await start_experiment(api, "long")
    await wait_for(lambda: runner.running >= 4, what="four of the tenant's runs to start")
    runner.release.set()
    assert (await wait_done(api, hog))["completed_runs"] == 6


async def test_one_tenants_slow_scoring_does_not_hold_back_anothers(api, runner, other_tenant_key, monkeypatch):
    other = Api(api.client, other_tenant_key, api.home)
    experiments = {}
    for who in (api, other):
        results = await finished_experiment(who, replicas=1)
        await add_llm_spans(who, results["id"], ["the answer is 42"])
        rule = await create_rule(who, name="says 42", type="regex", pattern="42", applies_to={"event_type": "llm_call"})
        experiments[who.key] = (results["id"], rule["id"])
    a_tenant_id = await tenant_id_of(api)
    release = asyncio.Event()
    real_score = Scorers.score

    async def slow_for_a(self, rule, spans):
        if self.tenant_id == a_tenant_id:
            await release.wait()  # tenant A's judge takes forever
        return await real_score(self, rule, spans)

    monkeypatch.setattr(Scorers, "score", slow_for_a)
    experiment_a, rule_a = experiments[api.key]
    response, a_job = await api.post(f"/v1/experiments/{experiment_a}/score", json={"rule_ids": [rule_a]})
    assert response.status == 202, a_job
    await wait_for(lambda: job_status(api, a_job["job_id"], "running"), what="tenant A's scoring job to start")
    experiment_b, rule_b = experiments[other.key]
    response, b_job = await other.post(f"/v1/experiments/{experiment_b}/score", json={"rule_ids": [rule_b]})
    assert response.status == 202, b_job
    finished = await wait_job(other, b_job["job_id"], timeout=10)
    assert finished["status"] == "completed"  # while A's job is still scoring
    release.set()
    await wait_job(api, a_job["job_id"])


async def job_status(api, job_id: str, status: str) -> bool:
    response, body = await api.get(f"/v1/score-jobs/{job_id}")
    return body.get("status") == status


async def tenant_id_of(api) -> str:
    from daemon.appkeys import STORE
    from daemon.util import sha256_hex

    row = await api.app[STORE].fetchone("SELECT tenant_id FROM api_keys WHERE secret_sha256 = ?", (sha256_hex(api.key),))
    return row["tenant_id"]


def test_the_per_tenant_cap_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("SERVICE_MAX_RUNNING_PER_TENANT", "3")
    assert Settings.from_env().max_running_per_tenant == 3
