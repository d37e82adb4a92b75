"""Composite score, gates, threshold and verdict precedence (SPEC scoring rules 1-5, 7)."""
from __future__ import annotations

import pytest

from daemon.scoring.composite import compose, invariant_score, weighted_mean


def inv(name, status, weight=1.0, gate=False, score=None):
    body = {"invariant_id": name, "status": status, "weight": weight, "gate": gate}
    if score is not None:
        body["score"] = score
    return body


def test_weighted_mean_with_default_weights():
    results = [inv("a", "passed"), inv("b", "failed"), inv("c", "passed", weight=2)]
    assert weighted_mean(results) == pytest.approx(3 / 4)


def test_graded_scores_are_clamped():
    assert invariant_score(inv("a", "passed", score=0.7)) == 0.7
    assert invariant_score(inv("a", "failed", score=1.5)) == 1.0
    assert invariant_score(inv("a", "failed", score=-1)) == 0.0
    assert invariant_score(inv("a", "skipped")) is None


def test_all_pass_is_pass():
    c = compose([inv("a", "passed"), inv("b", "passed", weight=3)], pass_threshold=1.0)
    assert (c.score, c.verdict, c.run_status) == (1.0, "pass", "passed")


def test_weighted_failure_under_threshold_fails():
    # 1 x 1 + 2 x 0 over 3 = 0.333 < 0.8
    c = compose([inv("a", "passed"), inv("b", "failed", weight=2)], pass_threshold=0.8)
    assert c.verdict == "fail" and c.score == pytest.approx(1 / 3, abs=1e-6)
    assert "below pass_threshold" in c.reasons[0]


def test_weighted_failure_over_threshold_passes():
    # 4 x 1 + 1 x 0 over 5 = 0.8 >= 0.8 (exactly at the threshold passes)
    c = compose([inv("a", "passed", weight=4), inv("b", "failed")], pass_threshold=0.8)
    assert c.verdict == "pass" and c.score == pytest.approx(0.8)


def test_failed_gate_forces_zero_and_fails():
    c = compose([inv("gate", "failed", weight=0.1, gate=True), inv("b", "passed", weight=10)], pass_threshold=0.0)
    assert c.score == 0.0 and c.verdict == "fail" and c.gates_failed == ["gate"]


def test_passed_gate_changes_nothing():
    c = compose([inv("gate", "passed", gate=True), inv("b", "failed")], pass_threshold=0.5)
    assert c.score == 0.5 and c.verdict == "pass"


def test_violation_fails_even_when_everything_passes():
    c = compose([inv("a", "passed")], pass_threshold=0.0, violations=[{"rule": "http_except"}])
    assert c.verdict == "fail" and c.score == 1.0
    assert "http_except" in c.reasons[0]


def test_skipped_judge_is_error_not_zero():
    c = compose([inv("a", "passed"), inv("judge", "skipped")], pass_threshold=1.0)
    assert c.verdict == "error" and c.score == 1.0 and c.skipped == ["judge"]


def test_infrastructure_error_wins():
    c = compose([inv("a", "failed", gate=True)], violations=[{"rule": "x"}], error="agent exceeded its timeout")
    assert c.verdict == "error" and c.reasons == ["agent exceeded its timeout"] and c.run_status == "errored"


def test_violation_and_gate_beat_a_skipped_check():
    assert compose([inv("a", "skipped"), inv("g", "failed", gate=True)]).verdict == "fail"
    assert compose([inv("a", "skipped")], violations=[{"rule": "r"}]).verdict == "fail"


def test_nothing_scored_is_error():
    c = compose([inv("a", "skipped")])
    assert c.verdict == "error" and c.score is None
