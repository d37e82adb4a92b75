"""Effects in the TUI (daemon/effects), against the real daemon app: the run view's Effects tab shows
a finished run's ledger read from its stored trajectory (kinds whose audit was off say `not
recorded`), the run pair view says what differs between two runs' effects, and the compare screen
lists the comparison's effects section per scenario. Agent-made names (hosts, paths, commands) are
shown as typed, never as markup."""
from __future__ import annotations

import json

from daemon.agents.blobs import Blobs
from daemon.appkeys import DEFAULT_TENANT_ID, STORE
from daemon.contract.effects import ScenarioEffectDifference, ScenarioEffects
from daemon.runner import records
from tests.support.specs import hello_yaml
from tests.support.tui import make_app, screen_text, upload_spec, wait_for
from tui.screens.compare import CompareScreen
from tui.screens.run import RunScreen
from tui.screens.run_pair import RunPairScreen

MARKUP_PATH = "/v1/[bold]refunds[/bold]"
MARKUP_COMMAND = "echo [link=https://evil.test]x[/link]"
AUDITED = hello_yaml("fx") + "audit:\n  http_calls: true\n  process_spawns: true\n"  # db_writes stays off


def trajectory(refunds: int) -> dict:
    http = {"type": "http_call", "details": {"method": "POST", "host": "api.example.test", "path": MARKUP_PATH, "status": 200}}
    return {"audit_events": [http] * refunds + [{"type": "process_spawn", "details": {"command": MARKUP_COMMAND, "exit_code": 0}}],
            "agent_audit_window": [0, refunds + 1],
            "trace_events": [{"event_type": "llm_call", "status": "ok",
                              "cost": {"model": "gpt-x", "input_tokens": 1200, "output_tokens": 30, "estimated_usd": 0.002}}],
            "workspace_changes": [{"path": "/workspace/answer.txt", "change": "added"}]}


async def finished_run(daemon, run_id: str, refunds: int | None) -> None:
    """A passed run of spec fx; with `refunds`, its stored trajectory POSTed that many refunds."""
    store = daemon.app[STORE]
    await records.insert(store, run_id=run_id, tenant_id=daemon.app[DEFAULT_TENANT_ID], spec_id="fx", spec_version=1, seed="seed_fx")
    fields = {"status": "passed", "verdict": "pass", "score": 1.0, "finished_at": "2025-01-01T00:00:05Z"}
    if refunds is not None:
        fields["trajectory_digest"] = Blobs(daemon.settings.blobs_dir).put_bytes(json.dumps(trajectory(refunds)).encode())
    await records.update(store, run_id, **fields)


async def test_the_effects_tab_shows_the_runs_ledger_and_what_was_not_recorded(daemon, api):
    await upload_spec(api, "fx", AUDITED)
    await finished_run(daemon, "run_fx1", refunds=2)
    await finished_run(daemon, "run_fx0", refunds=None)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(RunScreen(run_id="run_fx1"))
        screen = app.screen
        await wait_for(pilot, lambda: screen.effects is not None, what="the effect ledger")
        await pilot.press("5")
        await wait_for(pilot, lambda: "HTTP calls (1)" in screen_text(app), what="the effects tab")
        text = screen_text(app)
        assert "What run run_fx1 changed while the agent ran: 4 effect(s)" in text
        assert "Database writes: not recorded (audit.db_writes is off; unknown, not none)" in text
        assert "Files outside /workspace: not recorded" in text
        assert "Model calls (1)" in text and "gpt-x" in text and "1,200→30" in text
        assert "Files in /workspace (1)" in text and "added   /workspace/answer.txt" in text
        assert f"POST    api.example.test  2      200:2     {MARKUP_PATH}" in text  # as typed, not bold
        assert MARKUP_COMMAND in text  # not a link
        assert not app.query("Toast")  # nothing went wrong

        await app.push_screen(RunScreen(run_id="run_fx0"))
        await wait_for(pilot, lambda: app.screen._final, what="the run without a trajectory")
        await pilot.press("5")
        await wait_for(pilot, lambda: "No effects to show: run 'run_fx0' has no effects to show" in screen_text(app),
                       what="why there is no ledger")


async def test_the_run_pair_view_says_what_differs_between_two_runs_effects(daemon, api):
    await upload_spec(api, "fx", AUDITED)
    await finished_run(daemon, "run_fxa", refunds=1)
    await finished_run(daemon, "run_fxb", refunds=2)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(RunPairScreen("run_fxa", "run_fxb", "model=small"))
        await wait_for(pilot, lambda: app.screen.effects is not None, what="the effects diff")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "A = baseline run_fxa, B = candidate run_fxb" in text
        assert f"B POSTed api.example.test{MARKUP_PATH} twice (A once)" in text
        assert "not compared (not recorded in both runs): db" in text


async def test_the_compare_screen_lists_the_effects_that_differ_per_scenario(daemon, api):
    await upload_spec(api, "alpha")
    ids = []
    for name in ("baseline", "candidate"):
        created = await api.post("/v1/experiments", {"spec_id": "alpha", "name": name})
        await api.post(f"/v1/experiments/{created['id']}/cancel")
        ids.append(created["id"])
    app = make_app(daemon)
    real = app.backend.api.compare

    async def compare(*args, **kwargs):  # the daemon's own answer, plus an effects section its seeded runs cannot make
        result = await real(*args, **kwargs)
        result.effects = [ScenarioEffects(matrix_entry={"model": "[red]small"}, baseline_runs=["run_b"], candidate_runs=["run_c"], differences=[
            ScenarioEffectDifference(kind="db", key="db orders insert", side="between", baseline=[None], candidate=[1],
                                     message="candidate inserted 1 row into orders (baseline none)"),
            ScenarioEffectDifference(kind="file", key="file /workspace/[b]x", side="candidate", baseline=[None], candidate=["added", None],
                                     message="the candidate's 2 replicas differ on /workspace/[b]x (file): added, none")])]
        return result

    app.backend.api.compare = compare
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(CompareScreen(*ids))
        await wait_for(pilot, lambda: app.screen.result is not None, what="the comparison")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "Effects that differ: 1 between the experiments, 1 between replicas, in 1 scenario(s)" in text
        rows = [line for line in text.splitlines() if "model=[red]small" in line]
        assert len(rows) == 2 and "between" in rows[0] and "candidate inserted 1 row into orders (baseline none)" in rows[0]
        assert "candidate replicas" in rows[1] and "/workspace/[b]x (file): added, none" in rows[1]
        app.screen.query_one("#effects").focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunPairScreen), what="the run pair view")
        assert app.screen.run_ids == {"baseline": "run_b", "candidate": "run_c"}
