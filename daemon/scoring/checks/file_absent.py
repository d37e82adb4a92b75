"""``file_absent {path}``: passes when the workspace-relative path does not exist."""
from __future__ import annotations

from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    exists = await ctx.exists(check.path)
    return outcome("failed" if exists else "passed", {"path": check.path, "exists": exists})
