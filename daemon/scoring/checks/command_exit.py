"""``command_exit {command, expect_exit_code, timeout?}``: ``sh -c command`` in /workspace exits
with the expected code."""
from __future__ import annotations

from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    result = await ctx.exec(check.command, check.timeout, check.isolation)
    ok = result.exit_code == check.expect_exit_code and not result.timed_out
    evidence = {
        "command": check.command,
        "exit_code": result.exit_code,
        "expected_exit_code": check.expect_exit_code,
        "duration_ms": result.duration_ms,
        "stdout": ctx.tail(result.stdout),
        "stderr": ctx.tail(result.stderr),
    }
    if result.timed_out:
        evidence["timed_out"] = True
    return outcome("passed" if ok else "failed", evidence)
