"""Experiments and replica suites on the real engine: real sandboxes from the stock python image,
a one-line shell agent whose outcome depends on the matrix entry and on SERVICE_SEED (it fails on
odd seeds), the real scenario runner and scoring; compare and the `svc eval compare --gate` exit
code through the real CLI. The SIGKILL/restart test is in test_experiments_restart.py.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.experiments.seeds import derive_seed
from tests.support.api import Api
from tests.support.procs import svc_cli
from tests.support.specs import EXPERIMENT_AGENT, tiny_spec
from tests.support.sse import sse_data
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")
REPO = Path(__file__).resolve().parents[2]

AGENT = EXPERIMENT_AGENT


def odd(seed: str) -> bool:
    return seed[-1] in "13579bdf"


def base_seed_for(pattern: list[bool], matrix_index: int) -> str:
    for n in range(10_000):
        base = f"dk-{n}"
        if [odd(derive_seed(base, matrix_index, r)) for r in range(len(pattern))] == pattern:
            return base
    raise AssertionError("no base seed")


async def upload(api: Api, doc: dict[str, Any]) -> dict[str, Any]:
    return await api.upload_doc(doc)


async def wait_experiment(api: Api, experiment_id: str, timeout: float = 180) -> dict[str, Any]:
    async def finished():
        response, body = await api.get(f"/v1/experiments/{experiment_id}")
        assert response.status == 200, body
        return body if body["status"] in ("completed", "failed", "cancelled") else None
    return await wait_for(finished, timeout=timeout, what=f"{experiment_id} to finish", interval=0.2)


async def run(api: Api, **body: Any) -> dict[str, Any]:
    response, created = await api.post("/v1/experiments", json=body)
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started
    return await wait_experiment(api, created["id"])


async def test_matrix_replicas_verdicts_metrics_compare_and_gate(api: Api):
    await upload(api, tiny_spec())
    seed = base_seed_for([False, True, False], matrix_index=1)  # flaky entry: pass, fail, pass
    candidate = await run(api, name="candidate", spec_id="tiny", seed=seed)
    assert candidate["status"] == "completed" and candidate["total_runs"] == 6 and candidate["completed_runs"] == 6
    bad, flaky = candidate["scenarios"]
    assert bad["matrix_entry"] == {"mode": "bad"} and flaky["matrix_entry"] == {"mode": "flaky"}
    assert bad["verdict"] == "fail" and [r["status"] for r in bad["runs"]] == ["failed"] * 3
    assert flaky["verdict"] == "flaky" and [r["status"] for r in flaky["runs"]] == ["passed", "failed", "passed"]
    assert flaky["passed"] is True  # majority: 2 of 3
    assert (flaky["passed_runs"], flaky["failed_runs"]) == (2, 1)
    assert flaky["invariant_scores"]["wrote_ok"] == pytest.approx(2 / 3, abs=1e-6)
    metrics = candidate["metrics"]
    assert metrics["verdicts"] == {"pass": 0, "fail": 1, "flaky": 1, "error": 0}
    assert metrics["total_runs"] == 6 and metrics["pass_rate"] == pytest.approx(2 / 6, abs=1e-6)
    lo, hi = metrics["pass_rate_ci"]
    assert lo < 2 / 6 < hi and metrics["total_cost_usd"] == 0.0
    assert metrics["p95_wall_ms"] >= metrics["mean_wall_ms"] > 0
    # The runs are real: stored by the runner, with the seeds the experiment derived.
    for scenario in candidate["scenarios"]:
        for replica in scenario["runs"]:
            response, stored = await api.get(f"/v1/runs/{replica['run_id']}")
            assert response.status == 200 and stored["seed"] == replica["seed"] == derive_seed(seed, scenario["index"], replica["index"])
            assert stored["experiment_id"] == candidate["id"] and stored["scenario_id"] == scenario["id"]
            assert stored["matrix_entry"] == scenario["matrix_entry"]
    response, m = await api.get(f"/v1/metrics/experiments/{candidate['id']}")
    assert m["summary"]["total_runs"] == 6 and len(m["cost_trend"]) == 6

    # The failing replica's reproducer, run through the real CLI, fails the same way.
    reproducer = flaky["reproducer"]
    assert reproducer["seed"] == derive_seed(seed, 1, 1)
    args = reproducer["command"].split(" ", 1)[1]  # drop the leading "svc"
    code, out, err = await svc_cli(api, *__import__("shlex").split(args))
    assert code == 1, err
    assert json.loads(out)["status"] == "failed"

    # The agent fixed (spec version 2): every scenario passes; compare flags the old one.
    await upload(api, tiny_spec(agent="echo ok > ok.txt"))
    baseline = await run(api, name="baseline", spec_id="tiny", seed=seed)
    assert baseline["spec_version"] == 2 and baseline["metrics"]["verdicts"] == {"pass": 2, "fail": 0, "flaky": 0, "error": 0}
    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": baseline["id"], "candidate_id": candidate["id"],
                                                                       "gate_thresholds": True})
    assert response.status == 200 and result["regressed"] is True
    assert "pass_rate fell from 1.00 to 0.33 (-0.67, threshold -0.02)" in result["regressions"]
    changed = {json.dumps(c["matrix_entry"]): c for c in result["changed_scenarios"]}
    assert changed['{"mode": "bad"}']["candidate"]["verdict"] == "fail"
    assert changed['{"mode": "flaky"}']["candidate"]["verdict"] == "flaky"
    assert [r["index"] for r in changed['{"mode": "flaky"}']["replicas"]] == [1]

    code, out, err = await svc_cli(api, "eval", "compare", baseline["id"], candidate["id"], "--gate", "--gate-thresholds")
    assert code == 1 and json.loads(out)["regressed"] is True and "pass_rate fell" in err
    code, out, err = await svc_cli(api, "eval", "compare", baseline["id"], baseline["id"], "--gate")
    assert code == 0 and json.loads(out)["regressed"] is False


async def test_filter_failing_reruns_the_failed_scenarios_on_real_sandboxes(api: Api):
    await upload(api, tiny_spec("refix", replicas=1, matrix=[{"mode": "good"}, {"mode": "bad"}, {"mode": "good", "n": 2}]))
    first = await run(api, name="first", spec_id="refix")
    assert [s["verdict"] for s in first["scenarios"]] == ["pass", "fail", "pass"]
    again = await run(api, name="again", spec_id="refix", filter_failing_from=first["id"])
    assert [s["matrix_entry"] for s in again["scenarios"]] == [{"mode": "bad"}] and again["completed_runs"] == 1


async def test_replica_suite_on_real_sandboxes(api: Api):
    await upload(api, tiny_spec("suite", matrix=[]))
    response, suite = await api.post("/v1/replicas", json={"spec_id": "suite", "n_replicas": 4, "inputs": {"mode": "flaky"}})
    assert response.status == 202, suite
    response = await api.client.get(f"/v1/replicas/{suite['id']}/stream", headers={"Authorization": f"Bearer {api.key}"})
    events = sse_data(await response.text())
    assert events[-1]["type"] == "done" and len(events) == 5
    got = [(event["seed"], event["status"]) for event in events[:-1]]
    errors = [(await api.get(f"/v1/runs/{e['run_id']}"))[1].get("error") for e in events[:-1] if e["status"] == "errored"]
    assert got == [(seed, "failed" if odd(seed) else "passed") for seed, _ in got], errors
    final = events[-1]["suite"]
    assert final["failed"] == sum(odd(s) for s in suite["seeds"]) and final["status"] == "complete"


async def test_flaky_counts_under_each_strategy(api: Api):
    """Three experiments at once (the scheduler interleaves them), one per strategy, the same
    deterministic flaky replicas: verdict flaky with 2 passed / 1 failed everywhere; only the
    strategies' decision differs."""
    seed = base_seed_for([False, True, False], matrix_index=0)
    strategies = {"majority": True, "all_must_pass": False, "percentage": True}
    created = {}
    for strategy in strategies:
        doc = tiny_spec(f"strat-{strategy.replace('_', '-')}", matrix=[{"mode": "flaky"}], strategy=strategy)
        if strategy == "percentage":
            doc["scoring"]["replica_aggregation"]["min_pass_rate"] = 0.6
        await upload(api, doc)
        response, body = await api.post("/v1/experiments", json={"spec_id": doc["id"], "seed": seed})
        created[strategy] = body["id"]
    for experiment_id in created.values():
        response, _ = await api.post(f"/v1/experiments/{experiment_id}/run")
        assert response.status == 202
    for strategy, passed in strategies.items():
        results = await wait_experiment(api, created[strategy])
        [scenario] = results["scenarios"]
        assert scenario["verdict"] == "flaky" and (scenario["passed_runs"], scenario["failed_runs"]) == (2, 1), strategy
        assert scenario["passed"] is passed, strategy
        assert results["aggregation"]["strategy"] == strategy
