"""A scenario runner for the infrastructure-retry tests (tests/api/test_experiments_retries.py and the TUI's
tests/tui/test_retries.py) that answers the run bodies the real runner gives for an engine error during
boot, a fixture whose SQL fails and an agent whose exec the engine lost."""
from __future__ import annotations

import dataclasses

from daemon.appkeys import STORE
from daemon.store import runs as run_store
from tests.support.experiments import FakeRunner
from tests.support.fake_runs import fake_outcome


class BootingRunner(FakeRunner):
    """`engine_hiccup`: the first attempt of each seed fails to boot as when the engine answered
    an error; `full_disk`: as when the host could not make its workspace; `bad_fixture`: every
    attempt fails to boot at the fixtures step (a spec error)."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts: dict[str, int] = {}

    async def __call__(self, app, request):
        mode = (request.matrix_entry or {}).get("mode")
        key = f"{mode}:{request.seed}"
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if mode == "engine_hiccup" and self.attempts[key] == 1:
            return boot_failed(request, "internal", "unexpected error during boot: APIError: 500 Server Error for "
                               "http+docker://localhost/v1.43/networks/create: Internal Server Error")
        if mode == "full_disk" and self.attempts[key] == 1:
            return boot_failed(request, "workspace", "cannot make the workspace filesystem: mkfs.ext4 failed: No space left on device")
        if mode == "lost_agent" and self.attempts[key] == 1:
            return await lost_agent(app, request)
        if mode == "bad_fixture":
            return boot_failed(request, "fixtures", "fixture 'seed.sql' failed: ERROR: relation \"orders\" does not exist")
        return await super().__call__(app, request.__class__(**{**request.__dict__, "matrix_entry": {"mode": "pass"}}))


async def lost_agent(app, request) -> dict:
    """The run row the real runner leaves when its connection to the engine broke while the agent
    ran (`agent_engine_lost`): no exit status, so the check found nothing and the run failed."""
    store = app[STORE]
    await run_store.insert(store, run_id=request.run_id, tenant_id=request.tenant_id, spec_id=request.spec_record["id"],
                           spec_version=request.spec_record["version"], seed=request.seed, status="running",
                           scenario_id=request.scenario_id)
    result = {"agent": {"type": "cli", "name": "sh"}, "agent_exit_code": None, "agent_engine_lost": True,
              "invariant_results": [{"invariant_id": "ok", "name": "ok", "status": "failed", "score": 0.0}]}
    await run_store.update(store, request.run_id, status="failed", verdict="fail", reason="ok", result=result)
    outcome = fake_outcome(request, status="failed", verdict="fail", score=0.0, invariant_results=result["invariant_results"])
    return dataclasses.replace(outcome, agent_engine_lost=True)  # what the runner tells its caller beside the row


def boot_failed(request, step: str, message: str) -> dict:
    return fake_outcome(request, status="errored", verdict="error", reason="boot_failed",
                        error={"step": "boot", "code": "boot_failed", "message": f"sandbox failed to boot at step '{step}': {message}",
                               "sandbox_error": {"step": step, "message": message}})
