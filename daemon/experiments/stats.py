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

The verdict and ``passed`` come from ``daemon.scoring.aggregate.aggregate``, the one definition.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from daemon.scoring.aggregate import aggregate as aggregate_statuses
from daemon.scoring.aggregate import wilson_interval as wilson_bounds

Z_95 = 1.959963984540054


def wilson_interval(successes: int, total: int) -> tuple[float, float] | None:
    """95% Wilson score interval (rounded for display); ``None`` when ``total`` is 0."""
    if total <= 0:
        return None
    low, high = wilson_bounds(successes, total, Z_95)
    return (round(low, 6), round(high, 6))


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


def aggregate_replicas(statuses: Sequence[str], strategy: str = "majority", min_pass_rate: float | None = None) -> dict[str, Any]:
    """Combine replica run statuses into one scenario verdict (SPEC rules 6-7, defined once in
    ``daemon.scoring.aggregate``), in the field names experiments expose.

    Returns ``{verdict, passed, strategy, min_pass_rate, replicas, passed_runs, failed_runs,
    errored_runs, pass_rate, pass_rate_ci, flaky}``."""
    result = aggregate_statuses(statuses, strategy=strategy, min_pass_rate=min_pass_rate)
    n = result["n"]
    return {
        "verdict": result["verdict"],
        "passed": result["passed"],
        "strategy": strategy,
        "min_pass_rate": min_pass_rate,
        "replicas": n,
        "passed_runs": result["passed_count"],
        "failed_runs": result["failed_count"],
        "errored_runs": result["errored_count"],
        "pass_rate": round(result["pass_rate"], 6) if n else None,
        "pass_rate_ci": list(wilson_interval(result["passed_count"], n)) if n else None,
        "flaky": result["flaky"],
    }
