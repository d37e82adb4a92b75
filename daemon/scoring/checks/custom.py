"""``custom {command, timeout?}``: ``sh -c command`` in /workspace prints JSON
``{passed, score?, evidence?}`` on stdout (the whole output, or its last JSON line)."""
from __future__ import annotations

import json

from daemon.bounded import WorkTimeout, run_bounded
from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome


REPORT_LIMIT = 1024 * 1024  # the report is at the end: parse at most the last MiB of stdout


def parse_report(stdout: str) -> dict | None:
    text = stdout[-REPORT_LIMIT:].strip()
    candidates = [text] + [line.strip() for line in reversed(text.splitlines())]
    for candidate in candidates:
        if not candidate.startswith("{"):
            continue
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and "passed" in value:
            return value
    return None


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    result = await ctx.exec(check.command, check.timeout, check.isolation)
    base = {"command": check.command, "exit_code": result.exit_code, "duration_ms": result.duration_ms}
    stdout = result.stdout if isinstance(result.stdout, str) else result.stdout.decode("utf-8", "replace")
    try:
        report = await run_bounded(parse_report, stdout, what="parsing the custom check's stdout")
    except WorkTimeout as exc:
        return outcome("failed", {**base, **exc.evidence(), "stdout": ctx.tail(stdout)})
    if report is None:
        reason = "timed out" if result.timed_out else "did not print a JSON object with 'passed'"
        return outcome("failed", {**base, "error": f"custom check {reason}", "stdout": ctx.tail(stdout), "stderr": ctx.tail(result.stderr)})
    passed = report.get("passed") is True
    score = report.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        score = None
    else:
        score = min(1.0, max(0.0, float(score)))
    evidence = {**base, "reported": {k: v for k, v in report.items() if k != "evidence"}}
    if isinstance(report.get("evidence"), dict):
        evidence.update(report["evidence"])
    elif report.get("evidence") is not None:
        evidence["evidence"] = report["evidence"]
    return outcome("passed" if passed else "failed", evidence, score)
