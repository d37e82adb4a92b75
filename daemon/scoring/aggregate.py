"""Replica aggregation (SPEC "Scoring rules" 6 and 7) and a Wilson score interval. Pure functions.

``aggregate(["pass", "fail", "pass"], strategy="majority")`` returns the scenario verdict over its
replicas plus the numbers behind it:

* ``verdict``: ``pass`` (every replica passed), ``fail`` (none passed, at least one really failed),
  ``error`` (every replica errored: nothing was measured), ``flaky`` (some passed, some did not);
* ``passed``: the strategy's decision, the thing a CI gate looks at: ``majority`` (more than half
  passed), ``all_must_pass`` (every replica passed), ``percentage`` (pass rate >= ``min_pass_rate``).
  An errored replica counts as not passed;
* ``pass_rate`` with its 95 % Wilson interval ``[ci_low, ci_high]``.

Replica statuses may be scenario verdicts (``pass``/``fail``/``error``) or run statuses
(``passed``/``failed``/``errored``).
"""
from __future__ import annotations

import math
from typing import Any, Iterable

_NORMAL = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "error": "error", "errored": "error"}


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0.0, 1.0) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes ({successes}) must be between 0 and n ({n})")
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def strategy_passes(passed: int, n: int, strategy: str = "majority", min_pass_rate: float | None = None) -> bool:
    if n <= 0:
        return False
    if strategy == "majority":
        return passed * 2 > n
    if strategy == "all_must_pass":
        return passed == n
    if strategy == "percentage":
        if min_pass_rate is None:
            raise ValueError("strategy 'percentage' needs min_pass_rate")
        return passed / n + 1e-9 >= min_pass_rate
    raise ValueError(f"unknown replica aggregation strategy {strategy!r}")


def aggregate(statuses: Iterable[str], strategy: str = "majority", min_pass_rate: float | None = None) -> dict[str, Any]:
    normal = []
    for status in statuses:
        if status not in _NORMAL:
            raise ValueError(f"unknown replica status {status!r}")
        normal.append(_NORMAL[status])
    n = len(normal)
    passed = normal.count("pass")
    failed = normal.count("fail")
    errored = normal.count("error")
    if n == 0:
        verdict = "error"
    elif passed == n:
        verdict = "pass"
    elif passed > 0:
        verdict = "flaky"
    elif errored == n:
        verdict = "error"
    else:
        verdict = "fail"
    low, high = wilson_interval(passed, n)
    return {
        "verdict": verdict,
        "passed": strategy_passes(passed, n, strategy, min_pass_rate),
        "strategy": strategy,
        "min_pass_rate": min_pass_rate,
        "n": n,
        "passed_count": passed,
        "failed_count": failed,
        "errored_count": errored,
        "pass_rate": passed / n if n else 0.0,
        "failure_rate": (n - passed) / n if n else 0.0,
        "flaky": verdict == "flaky",
        "ci_low": low,
        "ci_high": high,
    }
