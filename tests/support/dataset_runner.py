"""A scenario runner for experiments over a dataset without Docker (the scheduler's seam,
`app[RUN_SCENARIO]`): its "agent" answers the record's `input.question` with
`input.answer`, and its check passes when that equals the record's `expected.answer`."""
from __future__ import annotations

import asyncio
from typing import Any

from daemon.runner.request import RunOutcome, ScenarioRequest
from tests.support.fake_runs import fake_outcome
from tests.support.specs import PYTHON
from tests.support.waiting import wait_for


class DatasetRunner:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, app, request: ScenarioRequest) -> RunOutcome:
        seed, inputs, matrix_entry, dataset_record = request.seed, request.inputs, request.matrix_entry, request.dataset_record
        self.calls.append({"inputs": inputs, "matrix_entry": matrix_entry, "dataset_record": dataset_record})
        await asyncio.sleep(0)
        expected = (dataset_record or {}).get("expected") or {}
        ok = (inputs or {}).get("answer") == expected.get("answer")
        return fake_outcome(request, status="passed" if ok else "failed", verdict="pass" if ok else "fail",
                            score=1.0 if ok else 0.0, seed=seed, duration_ms=1,
                            invariant_results=[{"invariant_id": "matches", "name": "matches",
                                                "status": "passed" if ok else "failed", "score": 1.0 if ok else 0.0}])


def spec_yaml(dataset_id: str, extra: str = "", matrix: str = "") -> str:
    """A spec over the dataset: the agent answers `{{ question }}`, the check compares answer.txt with
    `{{ expected.answer }}`; 2 replicas."""
    return f"""\
version: 1
id: qa
base: {PYTHON}
task:
  prompt: "answer {{{{ question }}}}"
agent:
  type: cli
  binary: sh
invariants:
  matches:
    check:
      type: file_content
      path: answer.txt
      equals: "{{{{ expected.answer }}}}"
parallelism:
  replicas: 2
{matrix}  dataset:
    id: {dataset_id}
{extra}"""


async def run_dataset_experiment(api, records: list[dict[str, Any]], spec_for) -> dict[str, Any]:
    """Create a dataset holding `records`, upload `spec_for(dataset_id)` (a spec document), run an
    experiment of it and return the finished experiment."""
    response, dataset = await api.post("/v1/datasets", json={"name": "echo"})
    assert response.status == 201, dataset
    response, added = await api.post(f"/v1/datasets/{dataset['id']}/records", json=records)
    assert response.status == 201, added
    document = spec_for(dataset["id"])
    await api.upload_doc(document)
    response, created = await api.post("/v1/experiments", json={"spec_id": document["id"]})
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started

    async def finished():
        _, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None
    return await wait_for(finished, timeout=300, what="the experiment to finish", interval=0.5)
