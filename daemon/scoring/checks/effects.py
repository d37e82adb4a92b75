"""`effects`: bounds over the agent's effect ledger as an invariant (the shape of
`forbidden.effects`, daemon/scoring/forbidden/effects.py): passes when every bound holds; its
evidence lists each bound with the value measured, and the failure names the ones broken."""
from __future__ import annotations

from typing import Any

from daemon.scoring.checks.context import CheckContext, outcome
from daemon.scoring.checks.results import CheckOutcome
from daemon.scoring.forbidden.effects import measure


async def evaluate(check: Any, ctx: CheckContext) -> CheckOutcome:
    rules = {"db": check.db or {}, "http": check.http or {}}
    measured = measure(rules, await ctx.agent_audit_events(), allows="the bound is")
    broken = [m for m in measured if not m["holds"]]
    evidence: dict[str, Any] = {"bounds": [{k: v for k, v in m.items()} for m in measured]}
    if broken:
        evidence["message"] = "; ".join(m["message"] for m in broken)
        return outcome("failed", evidence)
    evidence["message"] = "every effect bound holds: " + "; ".join(m["message"] for m in measured)
    return outcome("passed", evidence)
