"""The noise-aware gate: a paired test of a candidate against its baseline, scenario by scenario.

Why a paired test over scenarios: most of the variance between two experiments is between
scenarios (an easy one passes on both sides, a hard one fails on both), not between the two
sides. Pairing each candidate scenario with its baseline twin (same matrix entry, which for a
dataset scenario names its record) removes that part; what is left is the change itself plus the
replica noise of the scenarios that are flaky. A fixed threshold on the pooled pass rate ignores
both: one flaky scenario of ten, at three replicas, moves the pooled rate by up to 10 points.

The test: for each paired scenario ``i``, ``d_i`` is the candidate's pass fraction minus the
baseline's (``passed / finished`` replicas on each side, so replicas are respected: a scenario
with 3 replicas contributes a difference in thirds). Under "no change" each scenario's two sides
are exchangeable, so each ``d_i`` is as likely to be ``+d_i`` as ``-d_i``; the p-value is the
share of the ``2^n`` sign patterns whose sum is at least as far as the observed one in the
observed direction (a one-sided sign-flip randomization test: the gate asks "did it get worse?",
so a regression is called at most ``level`` of the time when nothing changed, and so is an
improvement). It is computed exactly, by counting sums over integers (the differences scaled by
the common denominator of the replica counts), for any number of scenarios. With one replica per
side each ``d_i`` is -1, 0 or +1 and the test *is* the exact (one-sided) McNemar test (ties drop
out, the discordant pairs are Binomial(n, 1/2)); with replicas it is its natural extension,
without a bootstrap's resampling error at ten scenarios. The interval reported with it
is a 95% percentile bootstrap of the mean difference over scenarios (seeded, so a comparison
answers the same every time).

Decisions per metric:

- ``regressed`` / ``improved``: p-value at most the level (default 0.05) in that direction; for an
  amount (wall time, cost) the change must also be beyond its threshold's magnitude, so a
  statistically clear 1% slowdown does not fail a build;
- ``no_change``: not significant, and the interval lies within the equivalence margin (5 points
  of pass rate; the threshold's magnitude for an amount);
- ``inconclusive``: neither (too few scenarios or too much replica noise to tell).

Wall time and cost per run are tested the same way over the per-scenario means, as log ratios
(``log(candidate / baseline)``, quantized to 1/1000 for the exact count). Metrics with no paired
per-scenario value (``tool_success_rate``, ``total_cost_usd``) get no test: ``no_change`` when
equal, else ``inconclusive``, unless the thresholds are asked for.
"""
from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any, Iterable, Sequence

# the design's parts the client computes too (its sequential rounds): they live in daemon.gate_design
from daemon.gate_design import (  # noqa: F401  (re-exported)
    SEQUENTIAL_ROUNDS, _label_value, round_slots, scenario_key, scenario_label, sequential_level, sequential_looks,
    sequential_rounds,
)

DEFAULT_LEVEL = 0.05
RATE_MARGIN = 0.05
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 29
LOG_QUANTUM = 1000  # log ratios are counted in thousandths
DRIVERS_SHOWN = 10

# The comparison metric a per-scenario value stands for.
TESTED = {"pass_rate": "pass_rate", "p95_wall_ms": "wall_ms", "mean_wall_ms": "wall_ms", "mean_cost_per_run_usd": "cost_usd"}


# --- pass@k and pass^k -----------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Chance that at least one of k replicas drawn from the n finished passes (the unbiased
    estimator 1 - C(n-c, k) / C(n, k)); None when k > n."""
    if k < 1 or k > n:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Chance that all of k replicas drawn from the n finished pass: C(c, k) / C(n, k)."""
    if k < 1 or k > n:
        return None
    return math.comb(c, k) / math.comb(n, k)


def pass_k_table(n: int, c: int) -> tuple[dict[str, float], dict[str, float]]:
    """pass@k and pass^k for k = 1..n, keyed by str(k)."""
    at = {str(k): round(pass_at_k(n, c, k) or 0.0, 6) for k in range(1, n + 1)}
    hat = {str(k): round(pass_hat_k(n, c, k) or 0.0, 6) for k in range(1, n + 1)}
    return at, hat


def overall_pass_k(scenarios: Iterable[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """Mean pass@k and pass^k over the scenarios that have that k (k up to the fewest finished replicas)."""
    tables = [(s.get("pass_at_k") or {}, s.get("pass_hat_k") or {}) for s in scenarios if s.get("pass_at_k")]
    if not tables:
        return {}, {}
    ks = set.intersection(*(set(at) for at, _ in tables))
    order = sorted(ks, key=int)
    at = {k: round(sum(t[0][k] for t in tables) / len(tables), 6) for k in order}
    hat = {k: round(sum(t[1][k] for t in tables) / len(tables), 6) for k in order}
    return at, hat


# --- the paired test ------------------------------------------------------------------------------


def sign_flip_p_value(diffs: Sequence[int]) -> float:
    """Exact one-sided p-value of the sign-flip test over integer differences, in the direction of
    the observed sum: the share of sign patterns whose sum is at least as far that way (zeros never
    move the sum, so they drop out)."""
    observed = sum(diffs)
    nonzero = [abs(d) for d in diffs if d]
    if not nonzero:
        return 1.0
    counts: dict[int, int] = {0: 1}
    for d in nonzero:
        nxt: dict[int, int] = {}
        for total, ways in counts.items():
            nxt[total + d] = nxt.get(total + d, 0) + ways
            nxt[total - d] = nxt.get(total - d, 0) + ways
        counts = nxt
    extreme = sum(ways for total, ways in counts.items() if (total <= observed if observed < 0 else total >= observed))
    return min(1.0, extreme / 2 ** len(nonzero))


def bootstrap_interval(diffs: Sequence[float], seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the mean over the paired differences."""
    n = len(diffs)
    if n == 0:
        return None
    if all(d == diffs[0] for d in diffs):
        return (round(diffs[0], 6), round(diffs[0], 6))
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(BOOTSTRAP_RESAMPLES))
    low = means[int(0.025 * BOOTSTRAP_RESAMPLES)]
    high = means[min(BOOTSTRAP_RESAMPLES - 1, int(0.975 * BOOTSTRAP_RESAMPLES))]
    return (round(low, 6), round(high, 6))


def _rate_diffs(pairs: list[tuple[dict, dict]]) -> tuple[list[Fraction], list[tuple[dict, dict]]]:
    diffs, used = [], []
    for b, c in pairs:
        nb, nc = b.get("completed_runs") or 0, c.get("completed_runs") or 0
        if not nb or not nc:
            continue
        diffs.append(Fraction(c.get("passed_runs") or 0, nc) - Fraction(b.get("passed_runs") or 0, nb))
        used.append((b, c))
    return diffs, used


def _scaled(diffs: Sequence[Fraction]) -> list[int]:
    denominator = math.lcm(*(d.denominator for d in diffs)) if diffs else 1
    return [int(d * denominator) for d in diffs]


def _amount(scenario: dict[str, Any], field: str) -> float | None:
    if field == "wall_ms":
        value = scenario.get("mean_wall_ms")
    else:
        cost, n = scenario.get("cost_usd"), scenario.get("completed_runs") or 0
        value = cost / n if isinstance(cost, (int, float)) and n else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _driver(b: dict, c: dict, value_b: Any, value_c: Any) -> dict[str, Any]:
    return {"matrix_entry": b.get("matrix_entry") or {}, "baseline_scenario_id": b.get("id"), "candidate_scenario_id": c.get("id"),
            "baseline": value_b, "candidate": value_c}


def quarantined(entry: dict[str, Any] | None, names: Sequence[str]) -> bool:
    """Whether a spec's ``quarantine:`` list holds the scenario of this matrix entry: a name holds
    every scenario whose entry has each of its key=value pairs (``(no matrix)``: the entry is empty)."""
    entry = entry or {}
    for name in names:
        if name == "(no matrix)":
            if not entry:
                return True
            continue
        pairs = [pair.split("=", 1) for pair in name.split(",")]
        if all(k.strip() in entry and _label_value(entry[k.strip()]) == v.strip() for k, v in pairs):
            return True
    return False


def pair_scenarios(baseline: list[dict[str, Any]], candidate: list[dict[str, Any]]) -> list[tuple[dict, dict]]:
    cand = {scenario_key(s): s for s in candidate}
    return [(b, cand[scenario_key(b)]) for b in baseline if scenario_key(b) in cand]


def stratified_p_value(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """Exact one-sided p-value of the stratified conditional test over 2x2 tables, one per scenario:
    ``(baseline passed, baseline finished, candidate passed, candidate finished)``.

    Under "no change" every finished replica of a scenario, baseline or candidate, passes with that
    scenario's own probability; given the scenario's total passes ``t``, the candidate's passes are
    hypergeometric (``t`` drawn from ``n_b + n_c`` replicas, ``n_c`` of them the candidate's). The
    statistic is the candidate's passes summed over the scenarios; its exact law is the convolution
    of those hypergeometrics (the exact conditional Mantel-Haenszel test, Birch 1964). The p-value is
    the tail in the direction of the observed sum from its expectation: ``P(S <= s)`` when the
    candidate passed less than expected, ``P(S >= s)`` when more; 1.0 when exactly as expected.
    Scenarios that passed everywhere or nowhere carry no information and drop out."""
    dist = [1.0]
    low, observed, expected = 0, 0, Fraction(0)
    for b_pass, b_n, c_pass, c_n in tables:
        total, runs = b_pass + c_pass, b_n + c_n
        if total == 0 or total == runs:
            continue
        first, last = max(0, total - b_n), min(total, c_n)
        denominator = math.comb(runs, total)
        pmf = [math.comb(c_n, c) * math.comb(b_n, total - c) / denominator for c in range(first, last + 1)]
        nxt = [0.0] * (len(dist) + len(pmf) - 1)
        for i, x in enumerate(dist):
            if x:
                for j, y in enumerate(pmf):
                    nxt[i + j] += x * y
        dist = nxt
        low += first
        observed += c_pass
        expected += Fraction(c_n * total, runs)
    if observed == expected:
        return 1.0
    at = observed - low
    tail = math.fsum(dist[:at + 1]) if observed < expected else math.fsum(dist[at:])
    return min(1.0, tail)


def _tables(used: list[tuple[dict, dict]]) -> list[tuple[int, int, int, int]]:
    return [(b.get("passed_runs") or 0, b.get("completed_runs") or 0, c.get("passed_runs") or 0, c.get("completed_runs") or 0)
            for b, c in used]


def replicas_to_decide(tables: Sequence[tuple[int, int, int, int]], level: float, power: float = 0.8) -> int | None:
    """Replicas per side at which the observed change, were it real, would be called at ``level``
    with ``power``: each scenario's rates shrunk towards 1/2 (half a pass and half a failure added,
    so 1/1 is 0.75, not a certainty), then the normal approximation of the stratified test with
    ``r`` replicas on each side. None when no count up to REPLICA_LADDER's last would do (the change
    is too small for replicas alone: add scenarios)."""
    z_alpha, z_power = _z(1 - level), _z(power)
    rates = [((bp + 0.5) / (bn + 1), (cp + 0.5) / (cn + 1)) for bp, bn, cp, cn in tables]
    shift = sum(pc - pb for pb, pc in rates)
    var0 = sum(2 * ((pb + pc) / 2) * (1 - (pb + pc) / 2) for pb, pc in rates)
    var1 = sum(pb * (1 - pb) + pc * (1 - pc) for pb, pc in rates)
    if not rates or abs(shift) < 1e-9:
        return None
    for r in REPLICA_LADDER:
        if abs(shift) * r - z_alpha * math.sqrt(var0 * r) >= z_power * math.sqrt(var1 * r):
            return r
    return None


def _z(q: float) -> float:
    """The standard normal quantile (bisection on erf; exact enough for a suggestion)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


REPLICA_LADDER = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50)
SCENARIO_TEST = "paired sign-flip over scenarios (exact McNemar with one replica)"
STRATIFIED_TEST = "stratified exact test over replicas (conditional Mantel-Haenszel, paired by scenario)"


def paired_pass_rate(pairs: list[tuple[dict, dict]], level: float = DEFAULT_LEVEL) -> dict[str, Any]:
    """The pass-rate test. Two tests are computed; which one decides is fixed by the design (the
    replica counts), never by the outcome, so the level holds (docs/explanation/gate.md):

    - one finished replica per side in every paired scenario: the scenario-level sign-flip test,
      which is then the exact McNemar test and the same test as the stratified one;
    - more than one replica on a side anywhere: the stratified exact test, so every replica counts
      as evidence while the pairing by scenario is kept (on the bench it is at least as powerful as
      the scenario-level test in every design measured, and far more powerful at a few scenarios).
    """
    diffs, used = _rate_diffs(pairs)
    floats = [float(d) for d in diffs]
    tables = _tables(used)
    scenario_p = sign_flip_p_value(_scaled(diffs)) if diffs else None
    stratified_p = stratified_p_value(tables) if tables else None
    replicated = any(bn > 1 or cn > 1 for _, bn, _, cn in tables)
    p_value = stratified_p if replicated else scenario_p
    test = STRATIFIED_TEST if replicated else SCENARIO_TEST
    interval = bootstrap_interval(floats)
    mean_diff = sum(floats) / len(floats) if floats else 0.0
    decision = _decide(p_value, mean_diff, interval, level, RATE_MARGIN, higher_is_better=True, practical=0.0)
    worse_first = sorted(zip(floats, used), key=lambda x: x[0] if decision != "improved" else -x[0])
    drivers = [_driver(b, c, b.get("pass_rate"), c.get("pass_rate")) for d, (b, c) in worse_first if d][:DRIVERS_SHOWN]
    design = _design(tables)
    why = (f"{design}: more than one replica on a side, so every replica counts (stratified by scenario)" if replicated
           else f"{design}: one replica per side, where the scenario-level test is the exact McNemar test")
    return {"test": test, "test_reason": why, "paired_scenarios": len(diffs),
            "mean_difference": round(mean_diff, 6), "p_value": _round_p(p_value), "interval": list(interval) if interval else None,
            "decision": decision, "drivers": drivers,
            "tests": [{"test": SCENARIO_TEST, "p_value": _round_p(scenario_p), "decided": not replicated},
                      {"test": STRATIFIED_TEST, "p_value": _round_p(stratified_p), "decided": replicated}],
            "reason": _rate_reason(decision, tables, design, p_value, interval, level)}


def _design(tables: Sequence[tuple[int, int, int, int]]) -> str:
    k = len(tables)
    counts = sorted({n for _, bn, _, cn in tables for n in (bn, cn)})
    each = (f"{counts[0]} replica{'s' if counts[0] != 1 else ''} each" if len(counts) == 1
            else f"{counts[0]} to {counts[-1]} replicas" if counts else "no finished replicas")
    return f"{k} scenario{'s' if k != 1 else ''}, {each}"


def _rate_reason(decision: str, tables: Sequence[tuple[int, int, int, int]], design: str, p_value: float | None,
                 interval: tuple[float, float] | None, level: float) -> str:
    """One line: why the pass-rate test answered as it did, and for ``inconclusive`` what would decide it."""
    if not tables:
        return "no paired scenario with finished replicas on both sides: nothing to test"
    if decision in ("regressed", "improved"):
        return f"{design}: p={p_value:.4g} <= {level:g}"
    if decision == "no_change":
        return f"{design}: not significant and the change lies within ±{RATE_MARGIN:g} of pass rate"
    need = replicas_to_decide(tables, level)
    if need is not None:
        suggestion = f"run with --replicas {need} (80% power if the observed change is real), or add scenarios"
    else:
        suggestion = "the observed change is too small for replicas alone: add scenarios"
    spread = (f"the change's interval [{interval[0]:+.2f}, {interval[1]:+.2f}] is not within ±{RATE_MARGIN:g}" if interval
              else "no interval")
    shown = "-" if p_value is None else f"{p_value:.4g}"
    return f"{design}: p={shown} > {level:g} and {spread}: {suggestion}"


def paired_amount(pairs: list[tuple[dict, dict]], field: str, margin: float, level: float = DEFAULT_LEVEL) -> dict[str, Any]:
    """Wall time or cost per run, lower is better: paired over per-scenario means as log ratios."""
    logs, used = [], []
    for b, c in pairs:
        vb, vc = _amount(b, field), _amount(c, field)
        if vb is None or vc is None:
            continue
        logs.append(math.log(vc / vb))
        used.append((b, c, vb, vc))
    p_value = sign_flip_p_value([round(x * LOG_QUANTUM) for x in logs]) if logs else None
    interval = bootstrap_interval(logs)
    mean_log = sum(logs) / len(logs) if logs else 0.0
    # Reported as relative changes (exp of the log ratio, minus 1).
    rel_interval = [round(math.exp(x) - 1, 6) for x in interval] if interval else None
    rel = math.exp(mean_log) - 1
    decision = _decide(p_value, rel, (rel_interval[0], rel_interval[1]) if rel_interval else None, level, margin, higher_is_better=False,
                       practical=margin)
    ordered = sorted(zip(logs, used), key=lambda x: -x[0] if decision != "improved" else x[0])
    drivers = [_driver(b, c, round(vb, 6), round(vc, 6)) for x, (b, c, vb, vc) in ordered if x][:DRIVERS_SHOWN]
    return {"test": "paired sign-flip over log ratios of per-scenario means", "paired_scenarios": len(logs),
            "mean_difference": round(rel, 6), "p_value": _round_p(p_value), "interval": rel_interval,
            "decision": decision, "drivers": drivers}


def _round_p(p: float | None) -> float | None:
    return None if p is None else round(p, 6)


def _decide(p_value: float | None, change: float, interval: tuple[float, float] | None, level: float, margin: float, *,
            higher_is_better: bool, practical: float) -> str:
    if p_value is None or interval is None:
        return "inconclusive"
    worse = change < 0 if higher_is_better else change > 0
    if p_value <= level and abs(change) > practical + 1e-12 and change != 0:
        return "regressed" if worse else "improved"
    if -margin - 1e-12 <= interval[0] and interval[1] <= margin + 1e-12:
        return "no_change"
    return "inconclusive"


def paired_gate(baseline: list[dict[str, Any]], candidate: list[dict[str, Any]], *, level: float = DEFAULT_LEVEL,
                margins: dict[str, float] | None = None, quarantine: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """The paired test of each tested metric (see TESTED), by metric name; the scenarios the
    ``quarantine`` names hold are left out."""
    pairs = [(b, c) for b, c in pair_scenarios(baseline, candidate) if not quarantined(c.get("matrix_entry"), quarantine)]
    margins = margins or {}
    out: dict[str, dict[str, Any]] = {"pass_rate": paired_pass_rate(pairs, level)}
    wall = paired_amount(pairs, "wall_ms", margins.get("p95_wall_ms", 0.20), level)
    out["p95_wall_ms"] = out["mean_wall_ms"] = wall
    out["mean_cost_per_run_usd"] = paired_amount(pairs, "cost_usd", margins.get("mean_cost_per_run_usd", 0.20), level)
    return out


# --- the sequential gate (`svc eval compare --gate --adaptive N`) ----------------------------------------
#
# Replicas are added in at most SEQUENTIAL_ROUNDS rounds and the comparison is looked at before the
# first round and after each one: ``1 + rounds`` looks, a number fixed by N alone before any outcome
# is seen. Every look tests at ``level / looks`` (a Bonferroni split of the level over the looks, the
# simplest alpha-spending rule: constant boundaries, like Pocock's, but from the union bound, so
# conservative): the chance of a false `regressed` at any look is at most the sum of the looks'
# chances, ``looks * level / looks = level``, whatever the looks' data have in common. Stopping on
# `no_change` or `improved` only removes later chances to alarm. The runs of a round go round-robin
# over (scenario, side) slots in a fixed order that continues from round to round, so which scenario
# gets a replica never depends on an outcome and each look is a fixed design for its exact test.
# docs/explanation/gate.md has the rule and the bench's measured error rates.

