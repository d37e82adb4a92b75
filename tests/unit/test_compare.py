"""Comparison math: default thresholds, directions, overrides, messages, scenario matching."""
from __future__ import annotations

import pytest

from daemon.experiments.compare import DEFAULT_THRESHOLDS, changed_scenarios, compare_summaries, resolve_thresholds


def summary(**kw):
    base = {"pass_rate": 0.9, "p95_wall_ms": 1000, "mean_cost_per_run_usd": 0.01, "tool_success_rate": 0.95,
            "mean_wall_ms": 800, "total_cost_usd": 0.1}
    base.update(kw)
    return base


def metric(result, name):
    return next(m for m in result["metrics"] if m["name"] == name)


def test_defaults_are_the_spec_thresholds_signed_by_direction():
    assert DEFAULT_THRESHOLDS == {"pass_rate": -0.02, "p95_wall_ms": 0.2, "mean_cost_per_run_usd": 0.2, "tool_success_rate": -0.05}
    result = compare_summaries(summary(), summary())
    assert result["thresholds"] == DEFAULT_THRESHOLDS
    assert result["threshold_kinds"] == {"pass_rate": "absolute", "p95_wall_ms": "relative",
                                         "mean_cost_per_run_usd": "relative", "tool_success_rate": "absolute"}


def test_equal_pair_is_not_a_regression_and_every_direction_is_same():
    result = compare_summaries(summary(), summary())
    assert result["regressed"] is False and result["regressions"] == []
    assert {m["direction"] for m in result["metrics"]} == {"same"}


def test_pass_rate_drop_beyond_two_points_regresses_with_a_readable_message():
    result = compare_summaries(summary(pass_rate=0.9), summary(pass_rate=0.7))
    assert result["regressed"] is True
    assert result["regressions"] == ["pass_rate fell from 0.90 to 0.70 (-0.20, threshold -0.02)"]
    m = metric(result, "pass_rate")
    assert m["direction"] == "worse" and m["regressed"] and m["delta"] == pytest.approx(-0.2)


def test_pass_rate_drop_within_the_threshold_is_worse_but_not_a_regression():
    result = compare_summaries(summary(pass_rate=0.90), summary(pass_rate=0.885))
    m = metric(result, "pass_rate")
    assert m["direction"] == "worse" and not m["regressed"] and not result["regressed"]
    # Exactly at the threshold is not beyond it.
    assert not compare_summaries(summary(pass_rate=0.5), summary(pass_rate=0.48))["regressed"]


def test_pass_rate_rise_is_better():
    m = metric(compare_summaries(summary(pass_rate=0.5), summary(pass_rate=1.0)), "pass_rate")
    assert m["direction"] == "better" and not m["regressed"]


def test_p95_and_cost_are_relative():
    result = compare_summaries(summary(p95_wall_ms=1000, mean_cost_per_run_usd=0.01), summary(p95_wall_ms=1300, mean_cost_per_run_usd=0.0119))
    p95, cost = metric(result, "p95_wall_ms"), metric(result, "mean_cost_per_run_usd")
    assert p95["regressed"] and p95["delta_pct"] == pytest.approx(0.3)
    assert "p95_wall_ms rose from 1000 to 1300 (+30.0%, threshold +20%)" in result["regressions"]
    assert cost["direction"] == "worse" and not cost["regressed"]  # +19%
    faster = metric(compare_summaries(summary(p95_wall_ms=1000), summary(p95_wall_ms=500)), "p95_wall_ms")
    assert faster["direction"] == "better" and not faster["regressed"]


def test_tool_success_rate_absolute_five_points():
    assert not compare_summaries(summary(tool_success_rate=0.95), summary(tool_success_rate=0.91))["regressed"]
    result = compare_summaries(summary(tool_success_rate=0.95), summary(tool_success_rate=0.80))
    assert result["regressions"] == ["tool_success_rate fell from 0.95 to 0.80 (-0.15, threshold -0.05)"]


def test_relative_metric_from_a_zero_baseline_regresses_on_any_increase():
    result = compare_summaries(summary(mean_cost_per_run_usd=0.0), summary(mean_cost_per_run_usd=0.002))
    assert metric(result, "mean_cost_per_run_usd")["regressed"]
    assert not compare_summaries(summary(mean_cost_per_run_usd=0.0), summary(mean_cost_per_run_usd=0.0))["regressed"]


def test_missing_values_are_unknown_and_never_regress():
    result = compare_summaries(summary(tool_success_rate=None), summary(tool_success_rate=0.1))
    m = metric(result, "tool_success_rate")
    assert m["direction"] == "unknown" and not m["regressed"] and m["delta"] is None


def test_overrides_take_either_sign_and_unknown_names_are_rejected():
    assert resolve_thresholds({"pass_rate": 0.3})["pass_rate"] == -0.3
    assert resolve_thresholds({"pass_rate": -0.3})["pass_rate"] == -0.3
    assert resolve_thresholds({"p95_wall_ms": -1.0})["p95_wall_ms"] == 1.0
    loose = compare_summaries(summary(pass_rate=0.9), summary(pass_rate=0.7), {"pass_rate": 0.25})
    assert not loose["regressed"] and loose["thresholds"]["pass_rate"] == -0.25
    with pytest.raises(ValueError, match="unknown threshold metric 'latency'"):
        resolve_thresholds({"latency": 1})


def test_informational_metrics_have_no_threshold():
    result = compare_summaries(summary(mean_wall_ms=100, total_cost_usd=1), summary(mean_wall_ms=10_000, total_cost_usd=100))
    assert not result["regressed"]
    assert metric(result, "mean_wall_ms")["direction"] == "worse" and metric(result, "mean_wall_ms")["threshold"] is None


def scenario(entry, verdict, statuses, sid="scn"):
    return {"id": sid, "matrix_entry": entry, "verdict": verdict, "pass_rate": None,
            "runs": [{"index": i, "status": s, "run_id": f"run_{sid}_{i}"} for i, s in enumerate(statuses)]}


def test_changed_scenarios_matched_by_matrix_entry_and_replica_index():
    baseline = [scenario({"m": 1}, "pass", ["passed", "passed"], "b1"), scenario({"m": 2}, "pass", ["passed", "passed"], "b2"),
                scenario({"m": 3}, "fail", ["failed", "failed"], "b3"), scenario({"m": 9}, "pass", ["passed"], "b9")]
    candidate = [scenario({"m": 2}, "flaky", ["passed", "failed"], "c2"), scenario({"m": 1}, "pass", ["passed", "passed"], "c1"),
                 scenario({"m": 3}, "pass", ["passed", "passed"], "c3"), scenario({"m": 4}, "pass", ["passed"], "c4")]
    out = changed_scenarios(baseline, candidate)
    by_entry = {c["matrix_entry"]["m"]: c for c in out["changed_scenarios"]}
    assert set(by_entry) == {2, 3}
    assert by_entry[2]["direction"] == "worse"
    assert by_entry[2]["baseline"] == {"scenario_id": "b2", "verdict": "pass", "pass_rate": None}
    assert by_entry[2]["replicas"] == [{"index": 1, "baseline": "passed", "candidate": "failed",
                                        "baseline_run_id": "run_b2_1", "candidate_run_id": "run_c2_1"}]
    assert by_entry[3]["direction"] == "better" and len(by_entry[3]["replicas"]) == 2
    assert out["only_in_baseline"] == [{"m": 9}] and out["only_in_candidate"] == [{"m": 4}]


def test_matrix_entry_matching_ignores_key_order():
    out = changed_scenarios([scenario({"a": 1, "b": 2}, "pass", ["passed"])], [scenario({"b": 2, "a": 1}, "error", ["errored"])])
    assert len(out["changed_scenarios"]) == 1 and out["changed_scenarios"][0]["direction"] == "worse"
    assert out["only_in_baseline"] == [] and out["only_in_candidate"] == []
