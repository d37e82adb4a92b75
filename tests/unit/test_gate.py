"""The paired gate's arithmetic (daemon/experiments/gate.py): exact McNemar with one replica,
replicas respected, decisions, pass@k and pass^k."""
from __future__ import annotations

import math

from daemon.experiments.gate import (STRATIFIED_TEST, SCENARIO_TEST, pass_at_k, pass_hat_k, paired_pass_rate, replicas_to_decide,
                                     sign_flip_p_value, stratified_p_value)


def scenarios(outcomes: list[tuple[int, int]], replicas: int = 1) -> list[dict]:
    return [{"matrix_entry": {"n": i}, "completed_runs": replicas, "passed_runs": p, "pass_rate": p / replicas}
            for i, (p, _) in enumerate(outcomes)]


def pairs(base: list[int], cand: list[int], replicas: int = 1) -> list[tuple[dict, dict]]:
    b = scenarios([(p, 0) for p in base], replicas)
    c = scenarios([(p, 0) for p in cand], replicas)
    return list(zip(b, c))


def test_with_one_replica_the_p_value_is_the_exact_one_sided_mcnemar_test():
    # 7 discordant pairs, 6 of them worse: P(X <= 1) for X ~ Binomial(7, 1/2); the 3 ties drop out.
    diffs = [-1] * 6 + [1] + [0] * 3
    assert sign_flip_p_value(diffs) == sum(math.comb(7, k) for k in (0, 1)) / 2 ** 7


def test_replicas_count_in_thirds_not_as_one_pass_or_fail():
    # Nine scenarios slip one replica in three, one gains one: not the same as nine clean flips.
    result = paired_pass_rate(pairs([3] * 10, [2] * 9 + [3], replicas=3))
    assert result["paired_scenarios"] == 10 and result["mean_difference"] == round(-0.3, 6) and result["p_value"] == round(1 / 512, 6)


def test_a_clear_drop_is_a_regression_driven_by_the_scenarios_that_dropped():
    result = paired_pass_rate(pairs([1] * 10, [0] * 6 + [1] * 4))
    assert result["decision"] == "regressed" and [d["matrix_entry"]["n"] for d in result["drivers"]] == [0, 1, 2, 3, 4, 5]


def test_one_flaky_scenario_of_ten_is_inconclusive_not_a_regression():
    # 3/3 -> 1/3 on one scenario: 4 passes of 6 runs, the candidate's 3 hold at most 1 with
    # probability C(3,1)C(3,3)/C(6,4) = 3/15; the scenario-level sign-flip says 1/2.
    result = paired_pass_rate(pairs([3] * 10, [3] * 9 + [1], replicas=3))
    assert result["decision"] == "inconclusive" and result["p_value"] == 0.2
    assert [(t["p_value"], t["decided"]) for t in result["tests"]] == [(0.5, False), (0.2, True)]


def test_identical_sides_are_no_change():
    assert paired_pass_rate(pairs([2, 3, 1], [2, 3, 1], replicas=3))["decision"] == "no_change"


def test_pass_at_k_and_pass_hat_k_follow_their_estimators():
    # 5 replicas, 2 passed: pass@2 = 1 - C(3,2)/C(5,2) = 0.7; pass^2 = C(2,2)/C(5,2) = 0.1
    assert (pass_at_k(5, 2, 2), pass_hat_k(5, 2, 2), pass_at_k(5, 2, 6)) == (0.7, 0.1, None)


# --- the stratified exact test (replicas count as evidence) -----------------------------------------


def test_ten_of_ten_to_none_of_ten_on_one_scenario_is_one_table_in_c_20_10():
    # 10 passes of 20 runs; all 10 landing on the baseline is 1 of C(20,10) = 184756 equally likely ways.
    assert stratified_p_value([(10, 10, 0, 10)]) == 1 / math.comb(20, 10)
    result = paired_pass_rate(pairs([10], [0], replicas=10))
    assert result["decision"] == "regressed" and result["test"] == STRATIFIED_TEST and result["p_value"] == round(1 / 184756, 6)
    assert "1 scenario, 10 replicas each" in result["test_reason"]


def test_one_of_one_to_none_of_one_is_a_coin_flip_and_says_what_would_decide_it():
    assert stratified_p_value([(1, 1, 0, 1)]) == 0.5
    result = paired_pass_rate(pairs([1], [0]))
    assert result["decision"] == "inconclusive" and result["test"] == SCENARIO_TEST and result["p_value"] == 0.5
    assert result["reason"].startswith("1 scenario, 1 replica each: p=0.5 > 0.05") and "run with --replicas 12" in result["reason"]


def test_with_one_replica_the_two_tests_are_the_same_exact_mcnemar_test():
    base, cand = [1] * 7 + [0] * 3, [0] * 6 + [1] * 2 + [0] * 2
    tables = [(b, 1, c, 1) for b, c in zip(base, cand)]
    mcnemar = sum(math.comb(7, k) for k in (0, 1)) / 2 ** 7  # 7 discordant, 1 of them better
    assert stratified_p_value(tables) == sign_flip_p_value([c - b for b, c in zip(base, cand)]) == mcnemar


def test_the_stratified_tail_convolves_the_scenarios_hypergeometrics():
    # Scenario A: 3/3 -> 1/3 (t=4 of 6): C in {1,2,3} with P = 3/15, 9/15, 3/15.
    # Scenario B: 2/2 -> 1/2 (t=3 of 4): C in {1,2} with P = 1/2, 1/2.
    # Observed S = 2, the least possible: P(S <= 2) = 3/15 * 1/2 = 0.1.
    assert math.isclose(stratified_p_value([(3, 3, 1, 3), (2, 2, 1, 2)]), 0.1)
    # An improvement is tested the other way: P(S >= 3) for 0/3 -> 3/3 is 1/C(6,3) = 1/20.
    assert math.isclose(stratified_p_value([(0, 3, 3, 3)]), 1 / 20)
    # Unequal replica counts: 4/4 -> 0/2 (t=4 of 6): P(C=0) = C(4,4)/C(6,4) = 1/15.
    assert math.isclose(stratified_p_value([(4, 4, 0, 2)]), 1 / 15)
    # Scenarios passing (or failing) everywhere carry nothing; no change at all is p = 1.
    assert stratified_p_value([(3, 3, 3, 3), (0, 3, 0, 3)]) == 1.0


def test_replicas_to_decide_grow_as_the_observed_change_shrinks():
    assert replicas_to_decide([(1, 1, 0, 1)], 0.05) == 12
    clear = replicas_to_decide([(10, 10, 0, 10)], 0.05)
    assert clear is not None and clear <= 3
    assert replicas_to_decide([(5, 10, 5, 10)], 0.05) is None  # no observed change: replicas alone will not decide it


def test_a_quarantine_name_holds_every_scenario_whose_entry_has_its_values():
    from daemon.experiments.gate import quarantined, paired_gate

    assert quarantined({"case": "b", "model": "x"}, ["case=b"]) and quarantined({"n": 3}, ["n=3"])
    assert not quarantined({"case": "a"}, ["case=b"]) and not quarantined({"case": "b"}, ["case=b,model=x"])
    assert quarantined({}, ["(no matrix)"]) and not quarantined({"n": 1}, ["(no matrix)"])
    base, cand = scenarios([(10, 0), (10, 0)], 10), scenarios([(10, 0), (0, 0)], 10)
    assert paired_gate(base, cand)["pass_rate"]["decision"] == "regressed"
    assert paired_gate(base, cand, quarantine=["n=1"])["pass_rate"]["decision"] == "no_change"


def test_the_spec_takes_a_quarantine_list_of_scenario_names():
    import pytest

    from daemon.spec import SpecValidationError, load_spec
    from tests.support.specs import spec_yaml

    assert load_spec(spec_yaml("q", extra='quarantine: ["case=b", "(no matrix)"]')).quarantine == ["case=b", "(no matrix)"]
    with pytest.raises(SpecValidationError, match="invalid scenario name 'nope'"):
        load_spec(spec_yaml("q", extra='quarantine: ["nope"]'))


# --- the sequential gate (--adaptive N) ------------------------------------------------------------


def test_adaptive_runs_go_in_at_most_four_rounds_and_each_look_tests_at_the_level_split_over_the_looks():
    from daemon.experiments.gate import sequential_level, sequential_looks, sequential_rounds

    assert sequential_rounds(20) == [5, 5, 5, 5] and sequential_rounds(7) == [2, 2, 2, 1] and sequential_rounds(2) == [1, 1]
    assert (sequential_looks(20), sequential_level(0.05, 20), sequential_looks(2), sequential_level(0.06, 2)) == (5, 0.01, 3, 0.02)


def test_adaptive_slots_cycle_over_scenarios_and_sides_from_round_to_round_whatever_the_outcomes():
    from daemon.experiments.gate import round_slots

    first = round_slots(["a", "b"], ("candidate", "baseline"), 0, 3)
    assert first == [("a", "candidate"), ("a", "baseline"), ("b", "candidate")]
    assert round_slots(["a", "b"], ("candidate", "baseline"), 3, 3) == [("b", "baseline"), ("a", "candidate"), ("a", "baseline")]
    assert round_slots([], ("candidate",), 0, 3) == []


def test_adaptive_holds_its_false_alarms_at_the_level_across_the_looks_in_a_seeded_simulation():
    # Coin-flip scenarios (p = 1/2, where the exact tests are least conservative), no change, --adaptive 20 from one
    # replica a side, the runs of client/gate_adaptive.py: the Bonferroni split keeps false alarms at or under 0.05.
    import random

    from tests.support.gate_simulation import sequential_trial

    rng = random.Random(37)
    trials = 300
    alarms = sum(sequential_trial(rng, 3, "no change", probabilities=[0.5, 0.5, 0.5])[0] for _ in range(trials))
    assert alarms / trials <= 0.05
    rng = random.Random(37)
    caught = sum(sequential_trial(rng, 1, "one scenario fails", probabilities=[1.0])[0] for _ in range(50))
    assert caught == 50  # an always-passing scenario that always fails now is called regressed every time
