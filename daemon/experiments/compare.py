"""Experiment comparison and the regression gate (``POST /v1/experiments/compare``).

Default thresholds (SPEC.md "Comparison result"):

| metric                  | better | threshold | kind      | regression when                                   |
|-------------------------|--------|-----------|-----------|---------------------------------------------------|
| pass_rate               | higher | 0.02      | absolute  | candidate < baseline - 0.02 (2 percentage points)  |
| p95_wall_ms             | lower  | 0.20      | relative  | candidate > baseline x 1.20                       |
| mean_cost_per_run_usd   | lower  | 0.20      | relative  | candidate > baseline x 1.20                       |
| tool_success_rate       | higher | 0.05      | absolute  | candidate < baseline - 0.05 (5 percentage points)  |

Rates (0..1) are compared in absolute points, amounts (time, money) relative to the baseline.
A threshold is a magnitude: its sign is implied by the metric's direction, so ``-0.02`` and
``0.02`` mean the same. Crossing means strictly beyond the threshold. A relative metric whose
baseline is 0 regresses on any increase. A metric missing on either side (no tool calls, no
finished runs) is reported with direction ``unknown`` and never regresses.

``direction`` is ``better`` / ``same`` / ``worse`` by the sign of the change (``same`` within
1e-9), independently of the threshold; ``regressed`` on a metric means it crossed its threshold.
The comparison also lists informational metrics (``mean_wall_ms``, ``total_cost_usd``) without a
threshold, and ``changed_scenarios``: scenarios matched by matrix entry whose verdict changed, with
the replicas (matched by replica index) whose status changed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

EPS = 1e-9


@dataclass(frozen=True)
class MetricRule:
    name: str
    higher_is_better: bool
    kind: str | None  # "absolute" | "relative" | None (informational)
    default: float | None


RULES: tuple[MetricRule, ...] = (
    MetricRule("pass_rate", True, "absolute", 0.02),
    MetricRule("p95_wall_ms", False, "relative", 0.20),
    MetricRule("mean_cost_per_run_usd", False, "relative", 0.20),
    MetricRule("tool_success_rate", True, "absolute", 0.05),
    MetricRule("mean_wall_ms", False, None, None),
    MetricRule("total_cost_usd", False, None, None),
)
GATED = {r.name: r for r in RULES if r.kind is not None}
DEFAULT_THRESHOLDS: dict[str, float] = {r.name: (-r.default if r.higher_is_better else r.default) for r in RULES if r.default is not None}


def signed_threshold(rule: MetricRule, value: float) -> float:
    magnitude = abs(float(value))
    return -magnitude if rule.higher_is_better else magnitude


def resolve_thresholds(overrides: dict[str, float] | None) -> dict[str, float]:
    """Defaults merged with overrides, every value signed (negative for higher-is-better).
    Raises ValueError naming an unknown metric."""
    merged = dict(DEFAULT_THRESHOLDS)
    for name, value in (overrides or {}).items():
        rule = GATED.get(name)
        if rule is None:
            raise ValueError(f"unknown threshold metric '{name}' (known: {', '.join(GATED)})")
        merged[name] = signed_threshold(rule, value)
    return merged


def _fmt(name: str, value: float) -> str:
    if name.endswith("_ms"):
        return f"{value:.0f}"
    if name.endswith("_usd"):
        return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"
    return f"{value:.2f}"


def compare_metric(rule: MetricRule, baseline: float | None, candidate: float | None, threshold: float | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rule.name,
        "baseline": baseline,
        "candidate": candidate,
        "delta": None,
        "delta_pct": None,
        "direction": "unknown",
        "higher_is_better": rule.higher_is_better,
        "threshold": threshold,
        "threshold_kind": rule.kind,
        "regressed": False,
        "message": None,
    }
    if baseline is None or candidate is None:
        return entry
    delta = candidate - baseline
    entry["delta"] = round(delta, 9)
    if baseline:
        entry["delta_pct"] = round(delta / abs(baseline), 6)
    scale = max(abs(baseline), abs(candidate), 1.0)
    if abs(delta) <= EPS * scale:
        entry["direction"] = "same"
    else:
        improved = delta > 0 if rule.higher_is_better else delta < 0
        entry["direction"] = "better" if improved else "worse"
    if threshold is None or rule.kind is None or entry["direction"] != "worse":
        return entry
    verb = "fell" if delta < 0 else "rose"
    if rule.kind == "absolute":
        regressed = delta < threshold - EPS if rule.higher_is_better else delta > threshold + EPS
        change = f"{delta:+.2f}" if not rule.name.endswith(("_ms", "_usd")) else f"{delta:+g}"
        limit = f"{threshold:+.2f}" if not rule.name.endswith(("_ms", "_usd")) else f"{threshold:+g}"
    else:
        if baseline == 0:
            regressed = True
            change, limit = "from 0", f"{threshold:+.0%}"
        else:
            relative = delta / abs(baseline)
            regressed = relative < threshold - EPS if rule.higher_is_better else relative > threshold + EPS
            change, limit = f"{relative:+.1%}", f"{threshold:+.0%}"
    if regressed:
        entry["regressed"] = True
        entry["message"] = (
            f"{rule.name} {verb} from {_fmt(rule.name, baseline)} to {_fmt(rule.name, candidate)} ({change}, threshold {limit})"
        )
    return entry


def compare_summaries(baseline: dict[str, Any], candidate: dict[str, Any], thresholds: dict[str, float] | None = None) -> dict[str, Any]:
    """Compare two metrics summaries. ``thresholds`` are overrides (see ``resolve_thresholds``)."""
    resolved = resolve_thresholds(thresholds)
    metrics = [
        compare_metric(rule, _number(baseline.get(rule.name)), _number(candidate.get(rule.name)), resolved.get(rule.name))
        for rule in RULES
    ]
    regressions = [m["message"] for m in metrics if m["regressed"]]
    return {
        "regressed": bool(regressions),
        "regressions": regressions,
        "metrics": metrics,
        "thresholds": resolved,
        "threshold_kinds": {name: GATED[name].kind for name in resolved},
    }


# Metrics whose paired test fails the gate (mean_wall_ms shares the wall-time test, informational).
STAT_GATED = ("pass_rate", "p95_wall_ms", "mean_cost_per_run_usd")


def gated_comparison(baseline_summary: dict[str, Any], candidate_summary: dict[str, Any], baseline_scenarios: list[dict[str, Any]],
                     candidate_scenarios: list[dict[str, Any]], *, thresholds: dict[str, float] | None = None,
                     level: float | None = None, gate_thresholds: bool = False, quarantine: list[str] | None = None) -> dict[str, Any]:
    """The comparison with the noise-aware gate (:mod:`daemon.experiments.gate`): every metric gains
    ``decision``, ``p_value``, ``interval`` and the scenarios that drove it; ``threshold_crossed``
    keeps the fixed-threshold answer. ``regressed`` is true exactly when the gate fails on that
    metric: a significant regression of a tested metric, or (``gate_thresholds``) a crossed threshold."""
    from daemon.experiments.gate import DEFAULT_LEVEL, paired_gate, quarantined, scenario_label

    level = DEFAULT_LEVEL if level is None else level
    result = compare_summaries(baseline_summary, candidate_summary, thresholds)
    margins = {name: abs(value) for name, value in result["thresholds"].items()}
    paired = paired_gate(baseline_scenarios, candidate_scenarios, level=level, margins=margins, quarantine=quarantine or ())
    held = [scenario_label(s.get("matrix_entry")) for s in candidate_scenarios if quarantine and quarantined(s.get("matrix_entry"), quarantine)]
    regressions: list[str] = []
    for entry in result["metrics"]:
        crossed, threshold_message = entry["regressed"], entry["message"]
        test = paired.get(entry["name"])
        entry["threshold_crossed"] = crossed
        if test is not None:
            entry.update(decision=test["decision"], p_value=test["p_value"], interval=test["interval"], test=test["test"],
                         paired_scenarios=test["paired_scenarios"], drivers=test["drivers"], test_reason=test.get("test_reason"),
                         tests=test.get("tests") or [], reason=test.get("reason"))
        else:
            entry.update(decision="no_change" if entry["direction"] == "same" else "inconclusive", p_value=None, interval=None,
                         test=None, paired_scenarios=None, drivers=[], test_reason=None, tests=[], reason=None)
        significant = entry["name"] in STAT_GATED and entry["decision"] == "regressed"
        entry["regressed"] = significant or (gate_thresholds and crossed)
        messages = []
        if significant:
            messages.append(_significant_message(entry, level))
        if gate_thresholds and crossed:
            messages.append(threshold_message)
        entry["message"] = "; ".join(messages) or None
        regressions += messages
    result.update(regressed=bool(regressions), regressions=regressions, level=level, gate_thresholds=gate_thresholds, quarantined=held)
    result.update(gate_verdict(result["metrics"], regressions))
    return result


def gate_verdict(metrics: list[dict[str, Any]], regressions: list[str]) -> dict[str, Any]:
    """The gate's one word and its one-line reason. ``regressed`` when any gated metric regressed;
    else ``inconclusive`` when the pass-rate test could not tell (wall time and cost are too noisy
    between any two runs for their "cannot tell" to hold a build: only their regressions count);
    else ``improved`` when a gated metric improved; else ``no_change``."""
    by_name = {m["name"]: m for m in metrics}
    rate = by_name.get("pass_rate") or {}
    if regressions:
        return {"decision": "regressed", "reason": "; ".join(regressions)}
    if rate.get("decision") == "inconclusive":
        return {"decision": "inconclusive", "reason": rate.get("reason") or "the pass-rate test could not tell"}
    improved = [name for name in STAT_GATED if (by_name.get(name) or {}).get("decision") == "improved"]
    if improved:
        return {"decision": "improved", "reason": f"{', '.join(improved)} improved; " + (rate.get("reason") or "")}
    return {"decision": "no_change", "reason": rate.get("reason") or "no gated metric changed"}


def _significant_message(entry: dict[str, Any], level: float) -> str:
    name, base, cand = entry["name"], entry["baseline"], entry["candidate"]
    verb = "fell" if (cand or 0) < (base or 0) else "rose"
    values = f" from {_fmt(name, base)} to {_fmt(name, cand)}" if base is not None and cand is not None else ""
    drivers = ", ".join(_entry_text(d["matrix_entry"]) for d in entry["drivers"][:3])
    more = f" (+{len(entry['drivers']) - 3} more)" if len(entry["drivers"]) > 3 else ""
    test = "stratified test over replicas" if entry.get("test", "").startswith("stratified") else "paired test"
    return (f"{name} {verb}{values} ({test} over {entry['paired_scenarios']} scenarios: p={entry['p_value']:.4g} <= {level:g}"
            + (f"; driven by {drivers}{more}" if drivers else "") + ")")


def _entry_text(entry: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in entry.items()) or "(no matrix)"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def dataset_mismatch(baseline: dict[str, Any] | None, candidate: dict[str, Any] | None) -> str | None:
    """Why two experiments' dataset versions make their comparison meaningless (their scenarios are
    other records), or None when both ran over the same version and tags, or neither had a dataset."""
    def name(ref: dict[str, Any] | None) -> str:
        if ref is None:
            return "no dataset"
        tags = f" (tags {', '.join(ref['tags'])})" if ref.get("tags") else ""
        return f"dataset {ref['id']} version {ref['version']}{tags}"

    def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
        if a is None or b is None:
            return a is b
        return (a["id"], a["digest"], a.get("tags")) == (b["id"], b["digest"], b.get("tags"))

    if same(baseline, candidate):
        return None
    return (f"the baseline ran over {name(baseline)} and the candidate over {name(candidate)}: their scenarios are different "
            "records, so the comparison is refused; run both over the same dataset version")


# --- scenarios ----------------------------------------------------------------------------------

VERDICT_RANK = {"pass": 3, "flaky": 2, "fail": 1, "error": 1}


def entry_key(entry: Any) -> str:
    return json.dumps(entry or {}, sort_keys=True, separators=(",", ":"))


def changed_scenarios(baseline: list[dict[str, Any]], candidate: list[dict[str, Any]]) -> dict[str, Any]:
    """Scenarios matched by matrix entry; verdict changes with the replica statuses (matched by
    replica index) that changed."""
    base = {entry_key(s.get("matrix_entry")): s for s in baseline}
    cand = {entry_key(s.get("matrix_entry")): s for s in candidate}
    changed = []
    for key, b in base.items():
        c = cand.get(key)
        if c is None:
            continue
        b_runs = {r["index"]: r for r in b.get("runs") or []}
        c_runs = {r["index"]: r for r in c.get("runs") or []}
        replicas = [
            {"index": i, "baseline": b_runs.get(i, {}).get("status"), "candidate": c_runs.get(i, {}).get("status"),
             "baseline_run_id": b_runs.get(i, {}).get("run_id"), "candidate_run_id": c_runs.get(i, {}).get("run_id")}
            for i in sorted(set(b_runs) | set(c_runs))
            if b_runs.get(i, {}).get("status") != c_runs.get(i, {}).get("status")
        ]
        if b.get("verdict") == c.get("verdict") and not replicas:
            continue
        rb, rc = VERDICT_RANK.get(b.get("verdict") or "", 0), VERDICT_RANK.get(c.get("verdict") or "", 0)
        direction = "same" if b.get("verdict") == c.get("verdict") else "better" if rc > rb else "worse" if rc < rb else "changed"
        changed.append({
            "matrix_entry": b.get("matrix_entry") or {},
            "direction": direction,
            "baseline": {"scenario_id": b.get("id"), "verdict": b.get("verdict"), "pass_rate": b.get("pass_rate")},
            "candidate": {"scenario_id": c.get("id"), "verdict": c.get("verdict"), "pass_rate": c.get("pass_rate")},
            "replicas": replicas,
        })
    return {
        "changed_scenarios": changed,
        "only_in_baseline": [base[k].get("matrix_entry") or {} for k in base if k not in cand],
        "only_in_candidate": [cand[k].get("matrix_entry") or {} for k in cand if k not in base],
    }


# Above this share of judge errors among an experiment's latest score rows, its scores are too
# incomplete to compare without saying so.
JUDGE_ERROR_WARN_RATE = 0.05


async def judge_warnings(store: Any, baseline_id: str, candidate_id: str) -> list[str]:
    """One warning per side whose judge error rate is above JUDGE_ERROR_WARN_RATE."""
    from daemon.store.scores import judge_error_rate

    warnings = []
    for side, experiment_id in (("baseline", baseline_id), ("candidate", candidate_id)):
        rate = await judge_error_rate(store, experiment_id)
        if rate is not None and rate > JUDGE_ERROR_WARN_RATE:
            warnings.append(f"{side} {experiment_id}: judge error rate {rate:.1%} is above {JUDGE_ERROR_WARN_RATE:.0%};"
                            " its scores leave those spans unscored")
    return warnings
