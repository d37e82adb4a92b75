"""A spec's resources.concurrency_limit bounds /v1/runs too (the job engine counts single runs,
suites and experiments of a spec together)."""
from __future__ import annotations

import asyncio

import pytest

from daemon.runner import runs as runs_module
from daemon.runner.engine import ENGINE_KEY
from tests.support.specs import SPEC_YAML
from tests.support.waiting import wait_for


@pytest.fixture
def room_for_four(monkeypatch):
    monkeypatch.setenv("SERVICE_MAX_CONCURRENT_RUNS", "4")  # only the spec's limit holds runs back
    monkeypatch.delenv("SERVICE_RUN_CONCURRENCY", raising=False)


async def test_concurrency_limit_bounds_single_runs(room_for_four, monkeypatch, api):
    started: list[str] = []
    release = asyncio.Event()

    async def recorder(app, request):
        started.append(request.run_id)
        await release.wait()

    monkeypatch.setattr(runs_module, "run_scenario", recorder)
    await api.upload_yaml(SPEC_YAML + "resources:\n  concurrency_limit: 1\n", name="hello")  # 201
    ids = []
    for _ in range(3):
        response, run = await api.post("/v1/runs", json={"spec_id": "hello"})
        assert response.status == 202, run
        ids.append(run["id"])
    await asyncio.sleep(0.3)
    assert started == ids[:1]
    assert api.app[ENGINE_KEY].limit == 4
    release.set()
    await wait_for(lambda: len(started) == 3, what="all three runs to start")
    assert started == ids
