"""Chaos: SERVICE_HOME's filesystem fills while an experiment runs (a loop-mounted ext4 of a few MiB
the test mounts; root only), then space comes back."""
from __future__ import annotations

import asyncio
import os

import pytest

from tests.support.api import start_api, stop_api
from tests.support.chaos import (
    SmallDisk, agents_running, experiment_outcome, integrity, leaked, real_engine, start_experiment,
)
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for

AGENT = "sleep 4; echo ok > ok.txt"


@pytest.mark.timeout(420)
async def test_service_home_fills_mid_experiment(home, engine):
    assert os.geteuid() == 0, "mounting the small filesystem needs root"  # fails, never skips, in CI
    with SmallDisk(home / "disk.img", home / "h", mib=32) as disk:
        api = await start_api(disk.mountpoint)
        try:
            experiment = await start_experiment(api, tiny_spec("full", AGENT, replicas=4, matrix=[{"mode": "good"}]))
            await wait_for(lambda: agents_running(api, real_engine(), 1), timeout=180, what="an agent running", interval=0.3)
            filler = await asyncio.to_thread(disk.fill)
            await asyncio.sleep(6)
            filler.unlink()
            outcome = await experiment_outcome(api, experiment, timeout=240)
            daemon_id = api.manager.settings.daemon_id
            _, runs = await api.get("/v1/runs", params={"limit": 100})
            reasons = sorted(str(r.get("reason")) for r in runs.get("items", []) if r.get("status") == "errored")
        finally:
            await stop_api(api, remove_home=False)
        print("disk full:", outcome, "errored:", reasons)
        # A full disk holds the store's writes until there is room (daemon/store/db.py) and fails boots
        # at their workspace step, which is the host's doing: retried, never `failed`
        assert outcome["status"] == "completed" and "fail" not in outcome["verdicts"], outcome
        assert outcome["failed"] == 0 and "failed" not in outcome["earlier"] and "lost" not in outcome["earlier"], outcome
        assert integrity(disk.mountpoint) == "ok"
        assert leaked(daemon_id, disk.mountpoint) == {"containers": [], "networks": [], "volumes": [], "dirs": []}
