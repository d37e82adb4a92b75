"""Per-rule and experiment-wide aggregates of score rows (the latest per span and rule)."""
from __future__ import annotations

from typing import Any


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


def summarize(rows: list[Any]) -> dict[str, Any]:
    """{scored, unscored, judge_error_rate, rules: [...]} from store.scores.aggregates rows."""
    rules = []
    for row in rows:
        scored = row["scored"]
        rules.append({
            "rule_id": row["rule_id"], "name": row["name"], "type": row["type"], "n": row["n"], "passed": row["passed"],
            "pass_rate": _rate(row["passed"], scored), "mean_score": None if row["mean_score"] is None else round(row["mean_score"], 6),
            "scored": scored, "unscored": row["n"] - scored, "judge_error_rate": _rate(row["errors"], row["n"]),
        })
    n = sum(r["n"] for r in rows)
    return {"scored": sum(r["scored"] for r in rules), "unscored": sum(r["unscored"] for r in rules),
            "judge_error_rate": _rate(sum(row["errors"] for row in rows), n), "rules": rules}
