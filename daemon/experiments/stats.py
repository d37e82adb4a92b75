"""Small statistics: Wilson score interval, nearest-rank percentile, replica aggregation.

Replica aggregation follows SPEC.md scoring rules 6-7. Replica (run) statuses are ``passed``,
``failed``, ``errored``. The scenario verdict is:

- ``error`` when every replica errored (the sandbox could not boot, the agent timed out, ...);
- ``pass`` when every replica passed;
- ``fail`` when no replica passed (a mix of failed and errored replicas is a ``fail``);
- ``flaky`` when some replicas passed and some did not.

Independently of the verdict, the spec's ``scoring.replica_aggregation.strategy`` decides whether
the scenario *counts as passed* (``passed``): ``majority`` (more than half of the replicas passed),
``all_must_pass`` (every replica passed) or ``percentage`` (pass rate >= ``min_pass_rate``). A
``flaky`` scenario can therefore pass under ``majority`` and fail under ``all_must_pass``; the
verdict still says ``flaky`` so the non-determinism is never hidden.

The verdict and ``passed`` come from ``daemon.scoring.aggregate.aggregate`` (issue 5) when it is
importable; the local implementation has the same contract and is kept as the fallback.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

Z_95 = 1.959963984540054


def wilson_interval(successes: int, total: int, z: float = Z_95) -> tuple[float, float] | None:
    """95% Wilson score interval for a binomial proportion; ``None`` when ``total`` is 0."""
    if total <= 0:
        return None
    if not 0 <= successes <= total:
        raise ValueError(f"successes must be within 0..{total}, got {successes}")
    p = successes / total
    z2 = z * z
    denom = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denom
    return (round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6))


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (p95 of 20 values is the 19th smallest); ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def _local_aggregate(statuses: Sequence[str], strategy: str, min_pass_rate: float | None) -> dict[str, Any]:
    n = len(statuses)
    passed = sum(1 for s in statuses if s == "passed")
    errored = sum(1 for s in statuses if s == "errored")
    failed = n - passed - errored
    if n == 0:
        verdict = "error"
    elif errored == n:
        verdict = "error"
    elif passed == n:
        verdict = "pass"
    elif passed == 0:
        verdict = "fail"
    else:
        verdict = "flaky"
    rate = passed / n if n else 0.0
    if strategy == "all_must_pass":
        ok = n > 0 and passed == n
    elif strategy == "percentage":
        ok = n > 0 and rate >= float(min_pass_rate if min_pass_rate is not None else 1.0) - 1e-12
    else:  # majority
        ok = passed * 2 > n
    return {
        "verdict": verdict,
        "passed": ok,
        "strategy": strategy,
        "min_pass_rate": min_pass_rate,
        "replicas": n,
        "passed_runs": passed,
        "failed_runs": failed,
        "errored_runs": errored,
        "pass_rate": round(rate, 6) if n else None,
        "pass_rate_ci": list(wilson_interval(passed, n)) if n else None,
        "flaky": verdict == "flaky",
    }


def aggregate_replicas(statuses: Sequence[str], strategy: str = "majority", min_pass_rate: float | None = None) -> dict[str, Any]:
    """Combine replica run statuses into one scenario verdict (see the module docstring).

    Returns ``{verdict, passed, strategy, min_pass_rate, replicas, passed_runs, failed_runs,
    errored_runs, pass_rate, pass_rate_ci, flaky}``."""
    result = _local_aggregate(statuses, strategy, min_pass_rate)
    external = _external_aggregate()
    if external is not None and statuses:
        try:
            theirs = external(list(statuses), strategy=strategy, min_pass_rate=min_pass_rate)
        except Exception:  # an incompatible signature must not break experiments
            theirs = None
        if isinstance(theirs, dict):
            for key in ("verdict", "passed"):
                if key in theirs and theirs[key] is not None:
                    result[key] = theirs[key]
            result["flaky"] = result["verdict"] == "flaky"
    return result


def _external_aggregate():
    """``daemon.scoring.aggregate.aggregate`` (issue 5), the shared definition of rules 6-7."""
    try:
        from daemon.scoring import aggregate as mod
    except Exception:
        return None
    return getattr(mod, "aggregate", None)
