"""How well a judge agrees with human labels: agreement, Cohen's kappa, F1, TPR, TNR, confusion.

A label `true` means the output should pass; the judge's prediction is its verdict's `passed`.
Examples whose judge call failed are left out of the metrics and counted as `unscored`."""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Iterable

from daemon.judges.evaluate import JudgeDefinition, Verdict, evaluate
from daemon.store.db import Store
from daemon.util import now_iso

MIN_EXAMPLES = 50
MIN_KAPPA = 0.6
CONCURRENCY = 8


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def metrics(pairs: Iterable[tuple[bool, bool]]) -> dict[str, Any]:
    """Metrics over (label, predicted) pairs."""
    counts = Counter((label, predicted) for label, predicted in pairs)
    tp, fp, tn, fn = counts[(True, True)], counts[(False, True)], counts[(False, False)], counts[(True, False)]
    n = tp + fp + tn + fn
    agreement = _ratio(tp + tn, n)
    kappa = None
    if n:
        chance = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / (n * n)
        kappa = (agreement - chance) / (1 - chance) if chance < 1 else None  # type: ignore[operator]
    return {
        "n": n, "agreement": agreement, "cohen_kappa": kappa, "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "tpr": _ratio(tp, tp + fn), "tnr": _ratio(tn, tn + fp), "confusion": {"tp": tp, "fp": fp, "tn": tn, "fn": fn},
    }


def warnings(result: dict[str, Any]) -> list[str]:
    found = []
    if result["n"] < MIN_EXAMPLES:
        found.append(f"only {result['n']} scored examples: at least {MIN_EXAMPLES} are needed for a reliable calibration")
    kappa = result["cohen_kappa"]
    if kappa is None:
        found.append("cohen_kappa is undefined: every label, or every verdict, is the same")
    elif kappa < MIN_KAPPA:
        found.append(f"cohen_kappa {kappa:.3f} is below {MIN_KAPPA}: the judge agrees poorly with the labels")
    return found


async def calibrate(store: Store, definition: JudgeDefinition, examples: list[dict[str, Any]], *,
                    use_cache: bool = True, tenant_id: str | None = None) -> dict[str, Any]:
    """Judge every labelled example (at most CONCURRENCY calls at a time) and measure the agreement."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(example: dict[str, Any]) -> Verdict:
        async with gate:
            return await evaluate(store, definition, input=example["input"], output=example["output"],
                                  expected=example.get("expected"), use_cache=use_cache, tenant_id=tenant_id)

    verdicts = await asyncio.gather(*(one(e) for e in examples))
    pairs = [(e["label"], v.passed) for e, v in zip(examples, verdicts) if v.judge_error is None and v.passed is not None]
    failed = Counter(v.judge_error["code"] for v in verdicts if v.judge_error is not None)
    result = metrics(pairs)
    result["warnings"] = warnings(result)
    if failed:
        result["warnings"].append(f"{sum(failed.values())} examples are unscored (judge errors: "
                                  + ", ".join(f"{code} {count}" for code, count in sorted(failed.items())) + ")")
    result.update(unscored=sum(failed.values()), judge_errors=dict(failed), calibrated_at=now_iso())
    return result
