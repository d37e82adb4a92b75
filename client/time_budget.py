"""Where a run's time went, as people read it: the parts of `Run.timings` (and an experiment's
`metrics.time_budget_ms`, their sums) in the order a run goes through them, as one line."""
from __future__ import annotations

from typing import Any

# (key, label): `setup` is part of `boot`, so it is shown inside it; `claim` replaces `boot` for a
# sandbox taken from the warm pool.
PARTS = (("queue_ms", "queue"), ("boot_ms", "boot"), ("claim_ms", "claim"), ("task_ms", "task"), ("agent_ms", "agent"),
         ("leftovers_ms", "leftovers"), ("snapshot_ms", "snapshot"), ("checks_ms", "checks"),
         ("forbidden_ms", "forbidden"), ("exports_ms", "exports"), ("teardown_ms", "teardown"))


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}s" if ms < 10_000 else f"{ms / 1000:.1f}s"


def budget_line(timings: dict[str, Any] | None, runs: int = 1) -> str:
    """`queue 0.01s · boot 1.20s (setup 0.30s) · agent 0.41s · ...`: each part's mean over `runs`;
    empty when nothing was timed."""
    if not isinstance(timings, dict) or runs < 1:
        return ""
    shown = []
    for key, label in PARTS:
        ms = timings.get(key)
        if not isinstance(ms, (int, float)) or isinstance(ms, bool):
            continue
        text = f"{label} {_seconds(ms / runs)}"
        setup = timings.get("setup_ms")
        if key == "boot_ms" and isinstance(setup, (int, float)) and setup:
            text += f" (setup {_seconds(setup / runs)})"
        shown.append(text)
    return " · ".join(shown)
