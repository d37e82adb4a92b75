"""The regression gate on a seeded simulation: false alarms at no change, power at a 20-point drop.

A spec whose agent passes scenario i with probability p_i (a mix of solid, flaky and hard
scenarios); the baseline and the candidate draw their replicas independently. For each trial we
ask two gates whether the candidate regressed:

- `paired`: the noise-aware gate (daemon/experiments/gate.py: paired sign-flip test at 0.05);
- `threshold`: the fixed threshold (pooled pass rate down by more than 2 points).

`adaptive` is the paired gate after a second round: up to N extra candidate and baseline runs
spread over the scenarios whose replicas disagreed (flaky on either side), as `--adaptive N` would
spend them. Prints the rates; asserts nothing.

    .venv/bin/python -m tests.bench.bench_gate [--trials 400]
"""
from __future__ import annotations

import argparse
import random

from daemon.experiments.gate import paired_pass_rate

PROBABILITIES = [1.0, 1.0, 1.0, 0.95, 0.9, 0.9, 0.8, 0.7, 0.6, 0.5]  # 10 scenarios, mean 0.835


def draw(rng: random.Random, p: float, n: int) -> int:
    return sum(rng.random() < p for _ in range(n))


def scenario(i: int, passed: int, runs: int) -> dict:
    return {"matrix_entry": {"n": i}, "completed_runs": runs, "passed_runs": passed, "pass_rate": passed / runs}


def trial(rng: random.Random, drop: float, replicas: int, adaptive: int) -> tuple[bool, bool, bool]:
    base_p = PROBABILITIES
    cand_p = [max(0.0, p - drop) for p in base_p]
    base = [[draw(rng, p, replicas), replicas] for p in base_p]
    cand = [[draw(rng, p, replicas), replicas] for p in cand_p]
    pooled_b = sum(b[0] for b in base) / sum(b[1] for b in base)
    pooled_c = sum(c[0] for c in cand) / sum(c[1] for c in cand)
    threshold = pooled_c < pooled_b - 0.02 - 1e-9

    def paired(b, c) -> bool:
        return paired_pass_rate(list(zip([scenario(i, *x) for i, x in enumerate(b)], [scenario(i, *x) for i, x in enumerate(c)])))[
            "decision"] == "regressed"

    first = paired(base, cand)
    budget = adaptive
    if budget:
        undecided = [i for i in range(len(base_p)) if 0 < base[i][0] < base[i][1] or 0 < cand[i][0] < cand[i][1]
                     or base[i][0] != cand[i][0]]
        while budget >= 2 and undecided:
            for i in undecided:
                if budget < 2:
                    break
                base[i][0] += draw(rng, base_p[i], 1)
                base[i][1] += 1
                cand[i][0] += draw(rng, cand_p[i], 1)
                cand[i][1] += 1
                budget -= 2
    return threshold, first, paired(base, cand) if adaptive else first


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--adaptive", type=int, default=30, help="extra runs for the adaptive round")
    args = parser.parse_args()
    print(f"10 scenarios x 3 replicas, p = {PROBABILITIES}; {args.trials} trials each, seed 29")
    print(f"{'gate':<34}{'false alarms (no change)':>26}{'power (20-point drop)':>24}")
    rows = {}
    for drop in (0.0, 0.2):
        rng = random.Random(29)
        counts = [0, 0, 0]
        for _ in range(args.trials):
            for k, fired in enumerate(trial(rng, drop, 3, args.adaptive)):
                counts[k] += fired
        rows[drop] = [c / args.trials for c in counts]
    names = ["fixed threshold (pass_rate -0.02)", "paired test (level 0.05)", f"paired + --adaptive {args.adaptive}"]
    for k, name in enumerate(names):
        print(f"{name:<34}{rows[0.0][k]:>26.3f}{rows[0.2][k]:>24.3f}")


if __name__ == "__main__":
    main()
