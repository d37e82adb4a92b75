"""Forbidden rules (trajectory constraints). One module per rule; each is a pure function
``check(value, view) -> list[violation]`` over a :class:`TrajectoryView`.

A violation is ``{rule, code: "invariant_violation", source, message, event}``: ``source`` says where
it was seen (``audit``, ``trace``, ``stdout``, ``stderr``, ``workspace``, ``container``) and
``event`` carries the offending event (redacted: a secret is named, its value never appears).
"""
from __future__ import annotations

from typing import Any

from daemon.scoring.forbidden import db_writes_outside, effects, file_writes_outside, http_except, secrets_in_logs, trace_tools
from daemon.scoring.forbidden.view import CODE, TrajectoryView, violation

RULES = {
    "db_writes_outside": db_writes_outside.check,
    "http_except": http_except.check,
    "secrets_in_logs": secrets_in_logs.check,
    "file_writes_outside": file_writes_outside.check,
    "effects": effects.check,
}

__all__ = ["RULES", "CODE", "TrajectoryView", "violation", "evaluate"]


def evaluate(forbidden: Any, view: TrajectoryView) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rule results, violations) for the declared rules of a spec's ``forbidden`` block (the
    model or a dict), plus the trace's own forbidden tool calls. A rule left out is not checked."""
    declared = forbidden.model_dump() if hasattr(forbidden, "model_dump") else dict(forbidden or {})
    results: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    for rule, check in RULES.items():
        value = declared.get(rule)
        if value is None:
            continue
        found = check(value, view)
        violations.extend(found)
        results.append(_result(rule, value, found))
    found = trace_tools.check(None, view)
    if found:
        violations.extend(found)
        results.append(_result("trace_tool_calls", None, found))
    return results, violations


def _result(rule: str, value: Any, found: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "invariant_id": f"forbidden.{rule}",
        "name": rule,
        "kind": "forbidden",
        "rule": value,
        "status": "failed" if found else "passed",
        "evidence": {"violations": found[:50], "violation_count": len(found)},
    }
