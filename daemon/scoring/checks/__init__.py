"""Invariant checks: one module per ``check.type``, each ``async evaluate(check, ctx) -> outcome``
where outcome is ``{status: passed | failed | skipped, score?, evidence}``.

``run_invariant`` wraps one check into an InvariantResult. A check that raises (the sandbox went
away, the engine failed) is ``skipped`` with ``evidence.check_error``: an infrastructure problem is
never reported as a score of 0."""
from __future__ import annotations

import logging
import time
from typing import Any

from daemon.scoring.checks import (
    command_exit,
    custom,
    effects,
    file_absent,
    file_content,
    file_exists,
    http_mock_assertions,
    llm_as_judge,
    sql,
)
from daemon.scoring.checks.context import CheckContext, JudgeConfig
from daemon.scoring.checks.expected import render_expected
from daemon.scoring.checks.results import CheckOutcome, InvariantOutcome

log = logging.getLogger("svcd.scoring")

CHECKS = {
    "command_exit": command_exit.evaluate,
    "file_exists": file_exists.evaluate,
    "file_absent": file_absent.evaluate,
    "file_content": file_content.evaluate,
    "sql": sql.evaluate,
    "http_mock_assertions": http_mock_assertions.evaluate,
    "custom": custom.evaluate,
    "llm_as_judge": llm_as_judge.evaluate,
    "effects": effects.evaluate,
}

__all__ = ["CHECKS", "CheckContext", "CheckOutcome", "InvariantOutcome", "JudgeConfig", "run_invariant"]


async def run_invariant(name: str, invariant: Any, ctx: CheckContext) -> InvariantOutcome:
    check = render_expected(invariant.check, ctx.expected) if ctx.expected_file else invariant.check
    started = time.perf_counter()
    try:
        result = await CHECKS[check.type](check, ctx)
    except Exception as exc:  # noqa: BLE001 - reported as evidence
        log.warning("check %s (%s) could not run: %s", name, check.type, exc, exc_info=True)
        result = CheckOutcome(status="skipped",
                              evidence={"check_error": f"{type(exc).__name__}: {ctx.redact(str(exc))[:500]}"})
    score = result.score
    if score is None:
        score = None if result.status == "skipped" else (1.0 if result.status == "passed" else 0.0)
    return InvariantOutcome(
        invariant_id=name, name=name, description=invariant.description, type=check.type, status=result.status,
        weight=invariant.weight, gate=invariant.gate, evidence=result.evidence,
        duration_ms=int((time.perf_counter() - started) * 1000), score=score,
    )
