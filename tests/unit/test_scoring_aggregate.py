"""Replica aggregation strategies, flaky verdicts and the Wilson interval."""
from __future__ import annotations

import pytest

from daemon.scoring.aggregate import aggregate, strategy_passes, wilson_interval


def test_all_pass_and_all_fail():
    assert aggregate(["pass"] * 3)["verdict"] == "pass"
    result = aggregate(["fail", "failed", "error"])
    assert result["verdict"] == "fail" and result["passed"] is False and result["errored_count"] == 1


def test_all_errored_is_error():
    assert aggregate(["error", "errored"])["verdict"] == "error"


@pytest.mark.parametrize(
    "statuses, strategy, rate, passed",
    [
        (["pass", "pass", "fail"], "majority", None, True),
        (["pass", "fail"], "majority", None, False),  # a tie is not a majority
        (["pass", "pass", "fail"], "all_must_pass", None, False),
        (["pass", "pass", "pass"], "all_must_pass", None, True),
        (["pass", "pass", "fail", "fail"], "percentage", 0.5, True),
        (["pass", "fail", "fail"], "percentage", 0.5, False),
        (["pass", "pass", "error"], "majority", None, True),
    ],
)
def test_strategies(statuses, strategy, rate, passed):
    result = aggregate(statuses, strategy, rate)
    assert result["passed"] is passed
    # the verdict names the replicas, not the strategy: flaky when some passed and some did not
    assert result["verdict"] == ("pass" if set(statuses) == {"pass"} else "flaky")


def test_mixed_is_flaky_with_rates():
    result = aggregate(["pass", "fail", "pass", "pass"])
    assert result["verdict"] == "flaky" and result["flaky"] is True
    assert result["pass_rate"] == 0.75 and result["failure_rate"] == 0.25
    assert result["ci_low"] < 0.75 < result["ci_high"]


def test_percentage_needs_a_rate_and_unknown_values_raise():
    with pytest.raises(ValueError):
        strategy_passes(1, 2, "percentage")
    with pytest.raises(ValueError):
        aggregate(["maybe"])
    with pytest.raises(ValueError):
        strategy_passes(1, 2, "vibes")


def test_wilson_interval_known_values():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-3) and high == pytest.approx(0.9433, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.1611, abs=1e-3)
    low, high = wilson_interval(20, 20)
    assert high == 1.0 and low == pytest.approx(0.8389, abs=1e-3)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
