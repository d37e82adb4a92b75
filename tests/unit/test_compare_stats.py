"""Statistics behind experiment results: Wilson interval, percentiles, replica aggregation (SPEC
rules 6-7) as experiments use it, run-level metrics and the RunResults scenario view."""
from __future__ import annotations

import pytest

from daemon.experiments.results import run_cost, run_metrics, scenario_view
from daemon.experiments.stats import aggregate_replicas, percentile, wilson_interval
from daemon.store.db import dumps


def test_wilson_interval_known_values():
    assert wilson_interval(0, 0) is None
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-3)
    lo, hi = wilson_interval(0, 5)
    assert lo == 0.0 and hi == pytest.approx(0.4345, abs=1e-3)
    # More samples, narrower interval around the same rate.
    assert (lambda a, b: (b[1] - b[0]) < (a[1] - a[0]))(wilson_interval(5, 10), wilson_interval(500, 1000))


def test_percentile_nearest_rank():
    assert percentile([], 95) is None
    assert percentile([7], 95) == 7
    assert percentile(list(range(1, 21)), 95) == 19
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([5, 1, 3], 50) == 3


# A deterministic flaky agent: replicas 0 and 2 pass, 1 fails (fails on odd seeds).
FLAKY = ["passed", "failed", "passed"]


@pytest.mark.parametrize("strategy,min_rate,passed", [
    ("majority", None, True),
    ("all_must_pass", None, False),
    ("percentage", 0.6, True),
    ("percentage", 0.7, False),
])
def test_flaky_replicas_under_each_strategy(strategy, min_rate, passed):
    agg = aggregate_replicas(FLAKY, strategy, min_rate)
    assert agg["verdict"] == "flaky" and agg["flaky"] is True
    assert (agg["passed_runs"], agg["failed_runs"], agg["errored_runs"], agg["replicas"]) == (2, 1, 0, 3)
    assert agg["passed"] is passed
    assert agg["pass_rate"] == pytest.approx(2 / 3, abs=1e-6)
    assert agg["pass_rate_ci"][0] < 2 / 3 < agg["pass_rate_ci"][1]


@pytest.mark.parametrize("statuses,verdict,passed", [
    (["passed"] * 3, "pass", True),
    (["failed"] * 3, "fail", False),
    (["errored"] * 3, "error", False),
    (["failed", "errored"], "fail", False),
    (["passed", "errored", "passed"], "flaky", True),
    ([], "error", False),
])
def test_verdicts(statuses, verdict, passed):
    agg = aggregate_replicas(statuses, "majority")
    assert agg["verdict"] == verdict and agg["passed"] is passed


def job(i, status, *, score=None, cost=None, wall=None, state="done", result=None, run_id=None):
    return {"replica_index": i, "seed": f"seed_{i}", "run_id": run_id or f"run_{i}", "state": state, "status": status,
            "score": score, "wall_ms": wall, "cost_usd": cost, "error": None, "attempts": 1, "previous_run_ids": "[]",
            "result": dumps(result) if result is not None else None, "started_at": None, "finished_at": None}


def test_run_metrics_counts_rates_costs_and_walls():
    jobs = [job(0, "passed", cost=0.01, wall=100), job(1, "failed", cost=0.03, wall=300), job(2, "errored", wall=200),
            job(3, None, state="queued")]
    m = run_metrics(jobs, trace_costs={"run_2": 0.02})
    assert (m["runs"], m["passed_runs"], m["failed_runs"], m["errored_runs"]) == (3, 1, 1, 1)
    assert m["pass_rate"] == pytest.approx(1 / 3, abs=1e-6)
    assert m["total_cost_usd"] == pytest.approx(0.06)  # run_2's cost comes from its trace events
    assert m["mean_cost_per_run_usd"] == pytest.approx(0.02)
    assert m["mean_wall_ms"] == 200 and m["p95_wall_ms"] == 300


def test_run_cost_shapes():
    assert run_cost({"cost": {"total_usd": 0.5}}) == 0.5
    assert run_cost({"cost": {"estimated_usd": 0.25}}) == 0.25
    assert run_cost({"cost": 0.1}) == 0.1
    assert run_cost({"cost": None}) is None and run_cost(None) is None


def test_scenario_view_aggregates_replicas_and_points_the_reproducer_at_a_failure():
    inv = lambda ok: [{"invariant_id": "wrote", "status": "passed" if ok else "failed"},  # noqa: E731
                      {"invariant_id": "graded", "status": "passed", "score": 0.5 if ok else 0.25}]
    jobs = [job(0, "passed", score=1.0, result={"invariant_results": inv(True)}),
            job(1, "failed", score=0.0, result={"invariant_results": inv(False), "reproducer": {"command": "svc runs create --seed seed_1"}}),
            job(2, "passed", score=1.0, result={"invariant_results": inv(True)})]
    scn = {"id": "scn_1", "experiment_id": "exp-1", "matrix_index": 0, "matrix_entry": dumps({"model": "m1"}), "replicas": 3,
           "finished_at": None}
    view = scenario_view(scn, jobs, spec_id="s", spec_version=2, inputs={"x": 1}, strategy="all_must_pass", min_pass_rate=None,
                         experiment_status="completed", trace_ids={"run_1": ["trace-a"]})
    assert view["status"] == "flaky" and view["verdict"] == "flaky" and view["passed"] is False
    assert (view["passed_runs"], view["failed_runs"], view["completed_runs"]) == (2, 1, 3)
    assert view["invariant_scores"] == {"wrote": pytest.approx(2 / 3, abs=1e-6), "graded": pytest.approx(1.25 / 3, abs=1e-6)}
    assert view["score"] == pytest.approx(2 / 3, abs=1e-6)
    assert view["reproducer"]["command"] == "svc runs create --seed seed_1"
    assert view["reproducer"]["replica_index"] == 1 and view["reproducer"]["run_id"] == "run_1"
    assert view["trace_ids"] == ["trace-a"]
    assert [r["verdict"] for r in view["runs"]] == ["pass", "fail", "pass"]
    # Without the runner's command the reproducer is built from spec version, seed, inputs, matrix entry.
    built = view["runs"][0]["reproducer"]
    assert built["seed"] == "seed_0" and built["spec_version"] == 2 and built["matrix_entry"] == {"model": "m1"}
    assert "--seed seed_0" in built["command"] and "--spec-version 2" in built["command"] and '"model":"m1"' in built["command"]


def test_scenario_view_status_while_running_and_after_cancel():
    scn = {"id": "scn_1", "experiment_id": "exp-1", "matrix_index": 0, "matrix_entry": "{}", "replicas": 2, "finished_at": None}
    running = scenario_view(scn, [job(0, "passed"), job(1, None, state="running")], spec_id="s", spec_version=1, inputs=None,
                            strategy="majority", min_pass_rate=None, experiment_status="running")
    assert running["status"] == "running" and running["verdict"] is None and running["passed"] is None
    cancelled = scenario_view(scn, [job(0, "passed"), job(1, None, state="cancelled")], spec_id="s", spec_version=1, inputs=None,
                              strategy="majority", min_pass_rate=None, experiment_status="cancelled")
    assert cancelled["status"] == "cancelled" and cancelled["verdict"] is None
