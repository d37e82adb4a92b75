"""A Harbor task on the swarm: its `environment/Dockerfile` becomes a Dockerfile base built on svcd's
engine and pulled by digest on a node (test_swarm_build.py), and its oracle (solution/solve.sh)
passes there with the reward its tests/test.sh wrote."""
from __future__ import annotations

from pathlib import Path

import pytest

from client.local_spec import upload_body
from daemon.tasks import harbor
from tests.support.runs import start_run, wait_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"


async def test_a_harbor_tasks_oracle_passes_on_the_swarm(api):
    task = harbor.load(TASKS / "hello-world")
    text = harbor.spec_yaml(task, oracle=True)
    response, record = await api.post("/v1/specs", json=upload_body(task.path / harbor.SPEC_NAME, task.name, text))
    assert response.status == 201, record
    run = await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=300)
    evidence = run["invariant_results"][0]["evidence"]
    assert (run["status"], run["score"], evidence.get("reward")) == ("passed", 1.0, 1.0), run
    assert any(ref.startswith("localhost/svc-build/") for ref in api.manager.driver._published), api.manager.driver._published
