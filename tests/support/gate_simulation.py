"""A seeded simulation of the regression gate (daemon/experiments/gate.py) on pass/fail scenarios, shared
by the gate's bench (tests/bench/bench_gate.py) and its unit tests: draws, the scenario rows the gate reads,
the changes simulated, and one `--adaptive` comparison as client/gate_adaptive.py runs it."""
from __future__ import annotations

import random

from daemon.experiments.gate import DEFAULT_LEVEL, paired_pass_rate, round_slots, sequential_level, sequential_rounds

PROBABILITIES = [0.95, 0.8, 0.6, 1.0, 0.9, 0.9, 0.7, 1.0, 0.5, 1.0]
ADAPTIVE_RUNS = 20


def draw(rng: random.Random, p: float, n: int) -> int:
    return sum(rng.random() < p for _ in range(n))


def scenario(i: int, passed: int, runs: int) -> dict:
    return {"matrix_entry": {"n": i}, "completed_runs": runs, "passed_runs": passed, "pass_rate": passed / runs}


def candidate_rates(base: list[float], change: str) -> list[float]:
    if change == "30-point drop":
        return [max(0.0, p - 0.3) for p in base]
    if change == "one scenario fails":
        return [0.0] + base[1:]
    return list(base)


def sequential_trial(rng: random.Random, k: int, change: str, runs: int = ADAPTIVE_RUNS, *, naive: bool = False,
                     probabilities: list[float] | None = None) -> tuple[bool, int]:
    """One `--adaptive runs` comparison from one replica a side, as client/gate_adaptive.py runs it:
    rounds of gate.sequential_rounds over the round_slots cycle, a look after each at the level split
    over the looks (at the full level every time when `naive`). Returns (called regressed, runs added)."""
    base_p = (probabilities or PROBABILITIES)[:k]
    cand_p = candidate_rates(base_p, change)
    odds = {"baseline": base_p, "candidate": cand_p}
    tally = {side: [[draw(rng, p, 1), 1] for p in odds[side]] for side in odds}  # [passed, runs] per scenario
    level = DEFAULT_LEVEL if naive else sequential_level(DEFAULT_LEVEL, runs)
    keys = [str(i) for i in range(k)]
    position = added = 0

    def decision() -> str:
        pairs = [(scenario(i, *tally["baseline"][i]), scenario(i, *tally["candidate"][i])) for i in range(k)]
        return str(paired_pass_rate(pairs, level)["decision"])

    word = decision()
    for size in sequential_rounds(runs):
        if word != "inconclusive":
            break
        for key, side in round_slots(keys, ("candidate", "baseline"), position, size):
            i = int(key)
            tally[side][i][0] += draw(rng, odds[side][i], 1)
            tally[side][i][1] += 1
        position += size
        added += size
        word = decision()
    return word == "regressed", added
