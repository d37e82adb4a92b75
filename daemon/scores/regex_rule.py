"""Regex rules: score 1 when the pattern is found in the span's text, else 0.

Patterns are tenant-supplied and span texts agent-supplied: every search has its own time limit
(the `regex` engine stops itself) and a batch runs off the event loop (daemon.bounded)."""
from __future__ import annotations

from typing import Any

import regex

from daemon.bounded import compile_pattern, run_bounded

SEARCH_LIMIT_S = 1.0  # per span; a search that runs out becomes a rule_error row, never a score


def span_text(span: dict[str, Any]) -> str:
    """What text rules read: the span's output, its input when it has no output."""
    output = span.get("output")
    return output if output is not None else (span.get("input") or "")


def verdict(score: float, threshold: float | None) -> bool:
    return score >= (0.5 if threshold is None else threshold)


def _score_all(pattern: str, threshold: float | None, texts: list[str]) -> list[dict[str, Any]]:
    compiled = compile_pattern(pattern, regex.MULTILINE)
    results = []
    for text in texts:
        try:
            match = compiled.search(text, timeout=SEARCH_LIMIT_S, concurrent=True)
        except TimeoutError:
            results.append({"score": None, "passed": None, "reason": None,
                            "judge_error": {"code": "rule_error", "message": f"the pattern did not finish within {SEARCH_LIMIT_S:g}s"}})
            continue
        score = 1.0 if match is not None else 0.0
        reason = f"pattern found at offset {match.start()}" if match is not None else "pattern not found"
        results.append({"score": score, "passed": verdict(score, threshold), "reason": reason, "judge_error": None})
    return results


async def score_regex(pattern: str, threshold: float | None, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result {score, passed, reason, judge_error} per span, in order."""
    texts = [span_text(s) for s in spans]
    return await run_bounded(_score_all, pattern, threshold, texts, what="regex rule",
                             limit_s=SEARCH_LIMIT_S * (len(texts) + 1) + 5.0)
