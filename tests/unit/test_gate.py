"""The paired gate's arithmetic (daemon/experiments/gate.py): exact McNemar with one replica,
replicas respected, decisions, pass@k and pass^k."""
from __future__ import annotations

import math

from daemon.experiments.gate import pass_at_k, pass_hat_k, sign_flip_p_value, paired_pass_rate


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
    result = paired_pass_rate(pairs([3] * 10, [3] * 9 + [1], replicas=3))
    assert result["decision"] == "inconclusive" and result["p_value"] == 0.5


def test_identical_sides_are_no_change():
    assert paired_pass_rate(pairs([2, 3, 1], [2, 3, 1], replicas=3))["decision"] == "no_change"


def test_pass_at_k_and_pass_hat_k_follow_their_estimators():
    # 5 replicas, 2 passed: pass@2 = 1 - C(3,2)/C(5,2) = 0.7; pass^2 = C(2,2)/C(5,2) = 0.1
    assert (pass_at_k(5, 2, 2), pass_hat_k(5, 2, 2), pass_at_k(5, 2, 6)) == (0.7, 0.1, None)
