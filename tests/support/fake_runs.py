"""What a fake scenario runner (a test's `app[RUN_SCENARIO]`) answers: a RunOutcome holding a Run of
the request with the fields the test cares about, over those of a run that did nothing."""
from __future__ import annotations

from typing import Any

from daemon.contract.runs import Run
from daemon.runner.request import RunOutcome, ScenarioRequest
from daemon.util import now_iso


def fake_outcome(request: ScenarioRequest, **fields: Any) -> RunOutcome:
    now = now_iso()
    body: dict[str, Any] = {
        "id": request.run_id, "sandbox_id": None, "spec_id": request.spec_record["id"],
        "spec_version": int(request.spec_record.get("version") or 1), "status": "passed", "verdict": "pass",
        "reason": None, "score": None, "invariant_results": [], "forbidden_results": [], "violations": [],
        "trajectory_url": None, "seed": request.seed, "inputs": request.inputs, "matrix_entry": request.matrix_entry,
        "experiment_id": request.experiment_id, "scenario_id": request.scenario_id, "replay_of": None, "agent": None,
        "error": None, "reproducer": None, "timings": None, "artifacts": [], "cost": None, "duration_ms": None,
        "created_at": now, "started_at": now, "finished_at": now,
    }
    body.update(fields)
    return RunOutcome.of(Run.model_validate(body))
