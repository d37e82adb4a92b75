"""Where a run's time went (Run.timings), on real sandboxes: every part of a run is timed (the queue
wait of an experiment's replica, the boot with the spec's setup inside it, the agent, stopping its
leftovers, the snapshot of what it changed, the checks, the forbidden rules, the teardown), and the
experiment's metrics sum them over its runs."""
from __future__ import annotations

import pytest

from daemon.runner.engine import ENGINE_KEY
from tests.support.api import Api
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

PARTS = {"queue_ms", "boot_ms", "setup_ms", "task_ms", "agent_ms", "leftovers_ms", "snapshot_ms", "checks_ms",
         "forbidden_ms", "teardown_ms"}


async def test_an_experiments_runs_time_every_part_and_its_metrics_sum_them(api: Api):
    doc = tiny_spec("budget", replicas=2, matrix=[{"mode": "good"}])
    doc["setup"] = {"commands": ["sleep 0.3"]}
    await api.upload_doc(doc)
    response, created = await api.post("/v1/experiments", json={"spec_id": "budget"})
    assert response.status == 201, created
    await api.post(f"/v1/experiments/{created['id']}/run")

    async def finished():
        response, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None
    experiment = await wait_for(finished, timeout=180, what="the experiment to finish", interval=0.2)
    runs = []
    for replica in experiment["scenarios"][0]["runs"]:
        response, run = await api.get(f"/v1/runs/{replica['run_id']}")
        runs.append(run)
    timed = [set(run["timings"]) for run in runs]
    summed = {part: sum(run["timings"][part] for run in runs) for part in PARTS}
    budget = experiment["metrics"]["time_budget_ms"]
    assert (timed, runs[0]["timings"]["setup_ms"] >= 300, {part: budget[part] for part in PARTS}) == (
        [PARTS, PARTS], True, summed)


async def test_an_experiment_says_which_concurrency_its_runs_started_under(api: Api):
    """No SERVICE_MAX_CONCURRENT_RUNS and no spec limit: the daemon chose, and the result says what."""
    await api.upload_doc(tiny_spec("chosen", replicas=2, matrix=[{"mode": "good"}]))
    response, created = await api.post("/v1/experiments", json={"spec_id": "chosen"})
    await api.post(f"/v1/experiments/{created['id']}/run")

    async def finished():
        response, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None
    experiment = await wait_for(finished, timeout=180, what="the experiment to finish", interval=0.2)
    chosen = experiment["metrics"]["concurrency"]
    adaptive = api.app[ENGINE_KEY].concurrency
    assert (adaptive is not None, 1 <= chosen["min"] <= chosen["max"] <= adaptive.ceiling) == (True, True)
