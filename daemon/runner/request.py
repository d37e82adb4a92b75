"""What a scenario run is asked to do (`ScenarioRequest`) and the seam that runs it (`ScenarioRunner`,
at `app[RUN_SCENARIO]`: `daemon.runner.scenario.run_scenario`, or a test's fake)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol


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


class ScenarioRunner(Protocol):
    """Runs one scenario end to end and returns the stored Run body (daemon.contract.runs.Run as a
    dict). Raises AtCapacity when no sandbox can be had now (the caller queues the run again)."""

    async def __call__(self, app: Any, request: ScenarioRequest) -> dict[str, Any]: ...
