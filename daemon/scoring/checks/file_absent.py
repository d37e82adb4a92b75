"""``file_absent {path}``: passes when the workspace-relative path does not exist."""
from __future__ import annotations

from daemon.scoring.checks.context import CheckContext, outcome


async def evaluate(check, ctx: CheckContext) -> dict:
    exists = await ctx.exists(check.path)
    return outcome("failed" if exists else "passed", {"path": check.path, "exists": exists})
