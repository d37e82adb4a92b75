"""The run view says why a run ended as it did, on its first lines, for each cause of a verdict (an
agent timeout, a boot error, a budget, a failed gate, a failed check, a forbidden rule), and opens
on the tab that explains it. Runs are stored as the runner records them (the real store of the real
in-process daemon), so no sandbox is needed."""
from __future__ import annotations

import pytest

from daemon.appkeys import DEFAULT_TENANT_ID, STORE
from daemon.runner import records
from tests.support.tui import make_app, upload_spec, wait_for
from tui.screens.run import RunScreen

RUNS = {
    "run_timeout": dict(status="errored", verdict="error", reason="agent_timeout", score=0.0, result={
        "invariant_results": [], "forbidden_results": [], "violations": [],
        "agent": {"type": "cli", "name": "sh", "command": ["sh"], "timeout_s": 5},
        "error": {"step": "agent", "message": "the agent exceeded its timeout (5s) and was killed", "code": "agent_timeout"},
    }),
    "run_boot": dict(status="errored", verdict="error", reason="boot_failed", score=0.0, result={
        "invariant_results": [], "forbidden_results": [], "violations": [],
        "error": {"step": "boot", "message": "setup command `pip install nope` exited 1", "code": "boot_failed"},
    }),
    "run_budget": dict(status="errored", verdict="error", reason="budget_exceeded", score=0.0, result={
        "invariant_results": [], "forbidden_results": [], "violations": [],
        "error": {"step": "agent", "code": "budget_exceeded", "message": "the run's model budget ran out: models.budget.cost_usd "
                  "0.5 reached after 12 calls, 3400 tokens, $0.5012; the gateway refused the next call"},
    }, models="live", model_spend='{"calls": 12, "input_tokens": 3000, "output_tokens": 400, "cost_usd": 0.5012, '
       '"budget": {"cost_usd": 0.5}}'),
    "run_gate": dict(status="failed", verdict="fail", reason="gate failed: tests (composite forced to 0)", score=0.0, result={
        "invariant_results": [
            {"invariant_id": "wrote", "status": "passed", "score": 1.0, "weight": 1.0},
            {"invariant_id": "tests", "status": "failed", "score": 0.0, "weight": 1.0, "gate": True,
             "evidence": {"exit_code": 1, "stdout": "2 failed, 3 passed"}},
        ], "forbidden_results": [], "violations": [],
    }),
    "run_check": dict(status="failed", verdict="fail", reason="composite 0.500 is below pass_threshold 0.8", score=0.5, result={
        "invariant_results": [
            {"invariant_id": "wrote", "status": "passed", "score": 1.0, "weight": 1.0},
            {"invariant_id": "style", "status": "failed", "score": 0.0, "weight": 1.0, "evidence": {"exit_code": 2}},
        ], "forbidden_results": [], "violations": [],
    }),
    "run_timed": dict(status="passed", verdict="pass", reason=None, score=1.0, result={
        "invariant_results": [{"invariant_id": "wrote", "status": "passed", "score": 1.0}],
        "forbidden_results": [], "violations": [],
        "timings": {"queue_ms": 40, "boot_ms": 1200, "setup_ms": 300, "task_ms": 10, "agent_ms": 2500, "leftovers_ms": 30,
                    "snapshot_ms": 120, "checks_ms": 400, "forbidden_ms": 5, "teardown_ms": 60},
    }),
    "run_rule": dict(status="failed", verdict="fail", reason="forbidden rule violated: file_writes_outside", score=0.0, result={
        "invariant_results": [{"invariant_id": "wrote", "status": "passed", "score": 1.0}],
        "forbidden_results": [{"invariant_id": "forbidden.file_writes_outside", "status": "failed"}],
        "violations": [{"rule": "file_writes_outside", "code": "invariant_violation", "source": "audit",
                        "message": "wrote /workspace/stray.txt", "event": {"type": "file_write", "path": "/workspace/stray.txt"}}],
    }),
}


async def store_run(daemon, run_id: str) -> None:
    store = daemon.app[STORE]
    await records.insert(store, run_id=run_id, tenant_id=daemon.app[DEFAULT_TENANT_ID], spec_id="alpha", spec_version=1, seed="seed_1")
    await records.update(store, run_id, duration_ms=5100, finished_at="2026-01-01T00:00:05Z", **RUNS[run_id])


@pytest.fixture
async def stored(daemon, api):
    await upload_spec(api, "alpha")
    for run_id in RUNS:
        await store_run(daemon, run_id)
    return daemon


def summary(app) -> list[str]:
    return [line.strip() for line in str(app.screen.query_one("#run-summary").render()).splitlines()]


async def open_run(app, pilot, run_id: str) -> RunScreen:
    await app.push_screen(RunScreen(run_id=run_id))
    run = app.screen
    await wait_for(pilot, lambda: run.info is not None and run._final, what=f"{run_id} loaded")
    await pilot.pause(0.05)
    return run


WHY = [  # run, its first line, its second line, the tab it opens on
    ("run_timeout", "error  agent_timeout after 5s in agent: the agent exceeded its timeout (5s)", "", "checks"),
    ("run_boot", "error  boot_failed in boot: setup command `pip install nope` exited 1", "", "checks"),
    ("run_budget", "error  budget_exceeded in agent: the run's model budget ran out: models.budget.cost_usd 0.5", "", "checks"),
    ("run_gate", "fail  gate failed: tests (composite forced to 0)", "✗ tests (gate)  → exit 1 · stdout 2 failed, 3 passed", "checks"),
    ("run_check", "fail  composite 0.500 is below pass_threshold 0.8", "✗ style  → exit 2", "checks"),
    ("run_rule", "fail  forbidden rule file_writes_outside violated", "✗ file_writes_outside: wrote /workspace/stray.txt", "audit"),
]


async def test_each_verdict_cause_is_explained_on_the_first_lines_and_its_tab(stored):
    app = make_app(stored)
    seen = []
    async with app.run_test(size=(160, 45)) as pilot:
        for run_id, _first, _second, _tab in WHY:
            run = await open_run(app, pilot, run_id)
            lines = summary(app)
            seen.append((run_id, lines[0][:len(_first)], lines[1][:len(_second)], run.query_one("#run-tabs").active))
            await pilot.press("escape")
    assert seen == WHY


async def test_trace_errors_that_did_not_decide_the_verdict_say_so(stored, api):
    await api.post("/v1/traces", {"events": [
        {"trace_id": "t1", "span_id": "s1", "run_id": "run_gate", "event_type": "tool_call", "tool": "grep",
         "phase": "complete", "status": "error", "error_type": "tool_error", "duration_ms": 3}]})
    app = make_app(stored)
    async with app.run_test(size=(160, 45)) as pilot:
        await open_run(app, pilot, "run_gate")
        await wait_for(pilot, lambda: "1 error(s) in the trace (did not decide the verdict)" in summary(app)[2], what="the label")


async def test_the_header_shows_who_answered_the_models_and_what_it_cost(stored):
    app = make_app(stored)
    async with app.run_test(size=(160, 45)) as pilot:
        await open_run(app, pilot, "run_budget")
        assert "models: live · 12 calls · $0.50 of $0.50" in summary(app)[2]


async def test_the_header_shows_where_the_runs_time_went(stored):
    app = make_app(stored)
    async with app.run_test(size=(200, 45)) as pilot:
        await open_run(app, pilot, "run_timed")
        assert ("5.1s (queue 0.04s · boot 1.20s (setup 0.30s) · task 0.01s · agent 2.50s · leftovers 0.03s · snapshot 0.12s · "
                "checks 0.40s · forbidden 0.01s · teardown 0.06s)") in summary(app)[2]
