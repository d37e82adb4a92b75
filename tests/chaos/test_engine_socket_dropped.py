"""Chaos (slow): the engine's socket disappears for 30 s while an experiment runs (connections
refused, open ones dropped; the containers keep running), then comes back."""
from __future__ import annotations

import asyncio

from tests.support.api import start_api, stop_api
from tests.support.chaos import (
    agents_running, bring_back, drop_socket, experiment_outcome, integrity, leaked, real_engine, start_experiment,
)
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for

AGENT = "sleep 6; echo ok > ok.txt"
DROPPED_S = 30.0


async def test_engine_socket_dropped_for_30s(home, engine):
    api = await start_api(home / "h")
    try:
        experiment = await start_experiment(api, tiny_spec("dropped", AGENT, replicas=4, matrix=[{"mode": "good"}]))
        await wait_for(lambda: agents_running(api, real_engine(), 2), timeout=180, what="two agents running", interval=0.3)
        await drop_socket(engine)
        await asyncio.sleep(DROPPED_S)
        await bring_back(engine)
        outcome = await experiment_outcome(api, experiment, timeout=400)
        daemon_id = api.manager.settings.daemon_id
    finally:
        if engine.server is None:
            await bring_back(engine)
        await stop_api(api, remove_home=False)
    print("socket dropped:", outcome)
    assert outcome["status"] == "completed" and outcome["verdicts"] == ["pass"], outcome
    assert outcome["failed"] == 0 and "failed" not in outcome["earlier"] and "lost" not in outcome["earlier"], outcome
    assert integrity(home / "h") == "ok"
    assert leaked(daemon_id, home / "h") == {"containers": [], "networks": [], "volumes": [], "dirs": []}
