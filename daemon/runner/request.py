"""What a scenario run is asked to do (`ScenarioRequest`), what it ended with (`RunOutcome`) and the
seam that runs it (`ScenarioRunner`, at `app[RUN_SCENARIO]`: `daemon.runner.scenario.run_scenario`,
or a test's fake)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from daemon.contract.runs import Run


@dataclass(frozen=True)
class ScenarioRequest:
    """One scenario run: the stored spec (`spec_record`, the row; `spec`, the parsed model), the run
    row it fills (`run_id`), its seed, and what varies it. `sandbox_id`: run in that existing sandbox
    instead of booting one. `dataset_record` ({id, expected}): the record of a dataset scenario, whose
    `expected` is written to /workspace/.svc/expected.json after the agent, before the checks.
    `cancel`, once set, asks the run to stop and tear its sandbox down."""

    tenant_id: str
    spec_record: dict[str, Any]
    spec: Any  # daemon.spec.models.Spec
    run_id: str
    seed: str
    inputs: dict[str, Any] | None = None
    matrix_entry: dict[str, Any] | None = None
    secrets: dict[str, str] | None = None
    sandbox_id: str | None = None
    experiment_id: str | None = None
    scenario_id: str | None = None
    cancel: asyncio.Event | None = None
    dataset_record: dict[str, Any] | None = None
    pins: dict[str, Any] | None = None  # a replay's pinned agent snapshot and model recording (RunPins)
    # the caller sends `run.completed` itself once it has decided the run's final status (the
    # experiment service: an infrastructure retry rewrites the row first)
    defer_webhook: bool = False
    # when the run was queued (ISO time): the wait before it started is its `queue_ms` timing
    queued_at: str | None = None


@dataclass(frozen=True)
class RunError:
    """Why a run errored: `code` is the run's `reason` (boot_failed, agent_timeout, ...), `step` the
    phase it happened in."""

    code: str
    message: str
    step: str | None = None
    boot_step: str | None = None  # the step a failed boot stopped at (runtime, network, image, ...)


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: its status (passed | failed | errored), verdict (pass | fail | error), composite
    score, error (None unless errored), the stored Run record, and what the daemon saw that is not in
    it: `agent_engine_lost`, its connection to the engine broke while the agent ran (the experiment
    service counts such a failure as the infrastructure's)."""

    status: str
    verdict: str | None
    score: float | None
    error: RunError | None
    run: Run
    agent_engine_lost: bool = False

    @classmethod
    def of(cls, run: Run, *, agent_engine_lost: bool = False) -> RunOutcome:
        error = None
        if run.error is not None:
            sandbox_error = run.error.get("sandbox_error")
            error = RunError(code=str(run.error.get("code") or run.reason or "error"), message=str(run.error.get("message") or ""),
                             step=run.error.get("step"),
                             boot_step=sandbox_error.get("step") if isinstance(sandbox_error, dict) else None)
        return cls(status=run.status, verdict=run.verdict, score=run.score, error=error, run=run,
                   agent_engine_lost=agent_engine_lost)

    @property
    def cancelled(self) -> bool:
        return "cancelled" in (self.error.code if self.error else None, self.run.reason)

    def error_text(self) -> str | None:
        """`<code>: <message>` of an errored run, else None."""
        if self.error is None:
            return self.run.reason
        return f"{self.error.code}: {self.error.message}" if self.error.message else self.error.code

    def body(self) -> dict[str, Any]:
        """The Run as the API answers it (only the keys it holds)."""
        return self.run.model_dump(mode="json", exclude_unset=True)


class ScenarioRunner(Protocol):
    """Runs one scenario end to end and returns its outcome (the stored Run inside). Raises
    AtCapacity when no sandbox can be had now (the caller queues the run again)."""

    async def __call__(self, app: web.Application, request: ScenarioRequest) -> RunOutcome: ...
