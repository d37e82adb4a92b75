"""A daemon killed between an experiment's completion and its alert evaluation: the next start
evaluates the experiments finished within the dedup window, so the rule fires once; one already
evaluated fires nothing more. (The crash window is reproduced by leaving the evaluation hook out of
the first app; everything else is the real app, store and receiver.)"""
from __future__ import annotations

import asyncio

import pytest

from daemon.api import alerts as alerts_api
from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from daemon.experiments.groups import COMPLETED_HOOKS_KEY
from tests.support.api import api_on, make_settings
from tests.support.experiments import run_experiment, upload
from tests.support.receivers import HttpReceiver
from tests.support.specs import spec_yaml


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "0.05")


@pytest.fixture
async def receiver():
    receiver = await HttpReceiver().start()
    yield receiver
    await receiver.stop()


async def daemon(aiohttp_client, home, runner, evaluate: bool = True):
    app = create_app(make_settings(home))
    app[RUN_SCENARIO] = runner
    if not evaluate:  # the completion hook of daemon/api/alerts.py is what the crash cut off
        app[COMPLETED_HOOKS_KEY][:] = [h for h in app[COMPLETED_HOOKS_KEY] if h.__module__ != alerts_api.__name__]
    return await api_on(aiohttp_client, app)


async def failing_experiment_with_rule(api, url: str) -> tuple[dict, dict]:
    response, rule = await api.post("/v1/alerts", json={"name": "pass rate low", "condition": "pass_rate < 0.8", "notify": "webhook",
                                                        "webhook_url": url})
    assert response.status == 201, rule
    await upload(api, spec_yaml(matrix=[{"mode": "fail"}]))
    return rule, await run_experiment(api, name="nightly", spec_id="demo")


async def test_an_experiment_whose_evaluation_was_cut_off_fires_at_the_next_start(aiohttp_client, tmp_path, runner, receiver):
    first = await daemon(aiohttp_client, tmp_path / "home", runner, evaluate=False)
    rule, done = await failing_experiment_with_rule(first, receiver.url)
    _, before = await first.get(f"/v1/alerts/{rule['id']}")
    await first.client.close()
    await daemon(aiohttp_client, tmp_path / "home", runner)
    [call] = await receiver.wait_calls(1)
    assert (before["state"], call["body"]["experiment_id"]) == ("no_data", done["id"])


async def test_an_experiment_already_evaluated_fires_nothing_more_at_the_next_start(aiohttp_client, tmp_path, runner, receiver):
    first = await daemon(aiohttp_client, tmp_path / "home", runner)
    rule, _ = await failing_experiment_with_rule(first, receiver.url)
    await receiver.wait_calls(1)
    await first.client.close()
    second = await daemon(aiohttp_client, tmp_path / "home", runner)
    await asyncio.sleep(0.3)  # what the start's evaluation would have queued is sent by now
    _, page = await second.get(f"/v1/alerts/{rule['id']}/deliveries")
    assert (page["count"], len(receiver.calls)) == (1, 1)
