"""The run stream's events as the run view reads them. The contract's RunEvent declares only `type`
(each kind adds its own keys); the keys the TUI uses are read here, once."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.contract.runs import InvariantResult, RunEvent


@dataclass
class RunStreamEvent:
    type: str  # step | tool_call | invariant_result | error | done
    invariant: InvariantResult | None = None  # invariant_result: {invariant_id, status}
    message: str | None = None  # error: what went wrong

    @classmethod
    def of(cls, event: RunEvent) -> "RunStreamEvent":
        from daemon.contract.runs import InvariantResult

        extra = event.model_extra or {}
        if event.type == "invariant_result":
            return cls(event.type, invariant=InvariantResult.model_validate(extra))
        if event.type == "error":
            return cls(event.type, message=str(extra.get("message") or extra.get("error") or "run error"))
        return cls(event.type)
