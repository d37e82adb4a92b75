"""A reproducer replays the agent its run had: the snapshot id is pinned, so uploading a fix under
the same name does not make the failing run's reproducer pass (through the real CLI and the
replay endpoint, real containers)."""
from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.runs import inv, replay_with_cli, run_spec, upload, upload_agent, wait_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

SPEC = {
    "version": 1, "id": "pinned", "base": "localhost/svc/python:3.11", "task": {"prompt": "write the answer"},
    "agent": {"type": "snapshot", "snapshot": "flip", "timeout": "30s"},
    "invariants": {"answer": inv({"type": "file_content", "path": "out.txt", "equals": "good"})},
    "resources": {"timeout": "2m"},
}


def agent_dir(root: Path, answer: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.py").write_text(f"open('/workspace/out.txt', 'w').write({answer!r})\n")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def failed_then_fixed(api, tmp_path_factory):
    """A run of snapshot v1 (fails), then v2 uploaded under the same name (the fix)."""
    root = tmp_path_factory.mktemp("agents")
    broken = await upload_agent(api, "flip", agent_dir(root / "v1", "bad"), ["python3", "agent.py"])
    await upload(api, SPEC)
    run = await run_spec(api, spec_id="pinned")
    fixed = await upload_agent(api, "flip", agent_dir(root / "v2", "good"), ["python3", "agent.py"])
    return run, broken, fixed


async def test_the_reproducer_names_the_snapshot_its_run_had(failed_then_fixed):
    run, broken, _ = failed_then_fixed
    assert (run["status"], run["reproducer"]["pins"]) == ("failed", {"agent_snapshot_id": broken["id"]}), run


async def test_the_pasted_reproducer_fails_again_after_the_fix_is_uploaded(api, failed_then_fixed):
    run, broken, _ = failed_then_fixed
    code, replayed = await replay_with_cli(api, run)
    assert (replayed["status"], replayed["agent"]["snapshot_id"]) == ("failed", broken["id"]), replayed


async def test_a_replay_runs_the_pinned_snapshot(api, failed_then_fixed):
    run, broken, _ = failed_then_fixed
    response, queued = await api.post(f"/v1/runs/{run['id']}/replay", json={})
    assert response.status == 202, queued
    replayed = await wait_run(api, queued["id"])
    assert (replayed["status"], replayed["agent"]["snapshot_id"]) == ("failed", broken["id"]), replayed


async def test_a_new_run_of_the_spec_gets_the_fix(api, failed_then_fixed):
    _, _, fixed = failed_then_fixed
    run = await run_spec(api, spec_id="pinned")
    assert (run["status"], run["agent"]["snapshot_id"]) == ("passed", fixed["id"]), run


async def test_a_pinned_snapshot_that_does_not_exist_is_named(api, failed_then_fixed):
    run = await run_spec(api, spec_id="pinned", pins={"agent_snapshot_id": "snap-gone"})
    assert (run["reason"], "'snap-gone'" in run["error"]["message"]) == ("agent_unavailable", True), run
