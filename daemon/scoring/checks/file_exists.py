"""``file_exists {path}``: passes when the workspace-relative path exists."""
from __future__ import annotations

from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    exists = await ctx.exists(check.path)
    return outcome("passed" if exists else "failed", {"path": check.path, "exists": exists})
