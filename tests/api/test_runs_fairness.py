"""The /v1/runs queue is round-robin by tenant: one tenant's pile of runs does not hold back
another tenant's single run (one worker, the scenario itself replaced by a recorder)."""
from __future__ import annotations

import asyncio

import pytest

from daemon.runner import runs as runs_module
from tests.support.specs import SPEC_YAML
from tests.support.waiting import wait_for


@pytest.fixture
def one_worker(monkeypatch):
    monkeypatch.setenv("SERVICE_RUN_CONCURRENCY", "1")


async def test_a_second_tenants_run_starts_before_most_of_the_firsts(one_worker, monkeypatch, api, other_tenant_key):
    started: list[str] = []
    release = asyncio.Event()

    async def recorder(app, request):
        started.append(request.run_id)
        await release.wait()  # the first run holds the only worker until everything is queued

    monkeypatch.setattr(runs_module, "run_scenario", recorder)
    for key in (None, other_tenant_key):
        response, body = await api.post("/v1/specs", json={"name": "hello", "yaml": SPEC_YAML}, key=key)
        assert response.status == 201, body

    a_runs = []
    for _ in range(8):
        response, run = await api.post("/v1/runs", json={"spec_id": "hello"})
        assert response.status == 202, run
        a_runs.append(run["id"])
    response, run = await api.post("/v1/runs", json={"spec_id": "hello"}, key=other_tenant_key)
    assert response.status == 202, run
    b_run = run["id"]

    release.set()
    await wait_for(lambda: len(started) == 9, what="all nine runs to start")
    assert sorted(started) == sorted(a_runs + [b_run])
    position = started.index(b_run)
    assert position <= 2, started  # the one run already going, at most one more of A's, then B's
    assert [r for r in started if r != b_run] == a_runs  # each tenant's own runs keep their order

