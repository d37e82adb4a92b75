"""What checks answer: `CheckOutcome` from one check's `evaluate`, `InvariantOutcome` from
`run_invariant` (the spec's invariant around it: its id, weight, gate, timing). The run stores an
InvariantOutcome as the Run's `invariant_results` entry (`model_dump()`, keys in this order)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CheckStatus = Literal["passed", "failed", "skipped"]


class CheckOutcome(BaseModel):
    """`score` is the check's own (a judge's, a custom report's); unset, the invariant scores 1.0
    when passed, 0.0 when failed and nothing when skipped."""

    model_config = ConfigDict(frozen=True)

    status: CheckStatus
    evidence: dict[str, Any] = Field(default_factory=dict)
    score: int | float | None = None


class InvariantOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    invariant_id: str
    name: str
    description: str | None = None
    type: str
    status: CheckStatus
    weight: int | float | None = None
    gate: bool | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    duration_ms: int
    score: int | float | None = None
