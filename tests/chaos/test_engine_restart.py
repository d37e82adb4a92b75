"""Chaos: the engine restarts while an experiment runs (its connections dropped, 500 to new ones,
this daemon's agent containers killed as a dockerd restart kills them), then comes back."""
from __future__ import annotations

import asyncio

from tests.support.api import start_api, stop_api
from tests.support.chaos import agents_running, experiment_outcome, integrity, leaked, real_engine, start_experiment
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for

AGENT = "sleep 6; echo ok > ok.txt"  # every agent passes, given the time


async def test_engine_restart_mid_experiment(home, engine):
    api = await start_api(home / "h")
    try:
        experiment = await start_experiment(api, tiny_spec("restart", AGENT, replicas=4, matrix=[{"mode": "good"}]))
        real = real_engine()
        victims = await wait_for(lambda: agents_running(api, real, 2), timeout=180, what="two agents running", interval=0.3)
        await engine.cut()
        for container in victims:
            await asyncio.to_thread(real.kill, container)
        await asyncio.sleep(3)
        engine.restore()
        outcome = await experiment_outcome(api, experiment)
        daemon_id = api.manager.settings.daemon_id
    finally:
        engine.restore()
        await stop_api(api, remove_home=False)
    print("engine restart:", outcome)
    assert outcome["status"] == "completed" and outcome["verdicts"] == ["pass"], outcome
    assert outcome["failed"] == 0 and outcome["retried"] >= 2 and "failed" not in outcome["earlier"], outcome
    assert "lost" not in outcome["earlier"]
    assert integrity(home / "h") == "ok"
    assert leaked(daemon_id, home / "h") == {"containers": [], "networks": [], "volumes": [], "dirs": []}
