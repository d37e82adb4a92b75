"""Infrastructure retries in the TUI, as in the reports: a replica whose first attempt the engine
failed (an error during boot, retried with a new run id and the same seed) shows ↻ and its count in
its row of the experiment screen, the experiment's summary counts the retries, the row's detail line
names the earlier attempts, and the run's view says it is a retry. The real daemon app (its scenario
runner the fake of tests/api/test_experiments_retries.py, no Docker) and the Textual pilot."""
from __future__ import annotations

import warnings

from daemon.appkeys import RUN_SCENARIO
from daemon.experiments import service as experiment_service
from tests.support.retries import BootingRunner
from tests.support.specs import spec_yaml
from tests.support.tui import eventually, make_app, screen_text, upload_spec, wait_for
from tui.screens.experiment import ExperimentScreen
from tui.screens.run import RunScreen


async def test_a_retried_replica_shows_its_retries_in_its_row_and_in_its_run_view(daemon, api, monkeypatch):
    monkeypatch.setattr(experiment_service, "INFRA_RETRY_S", 0.01)
    with warnings.catch_warnings():  # the started app's scenario runner, swapped before anything runs
        warnings.simplefilter("ignore", DeprecationWarning)
        daemon.app[RUN_SCENARIO] = BootingRunner()
    await upload_spec(api, "hiccup", spec_yaml("hiccup", matrix=[{"mode": "engine_hiccup"}, {"mode": "pass"}]))
    created = await api.post("/v1/experiments", {"spec_id": "hiccup", "name": "hiccup"})
    await api.post(f"/v1/experiments/{created['id']}/run", {})

    async def done():
        body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] == "completed" else None

    results = await eventually(done, timeout=30)
    assert results, "the experiment did not finish"
    retried, clean = results["scenarios"]
    [first] = retried["runs"][0]["previous_run_ids"]
    assert retried["retried_runs"] == 1 and clean["retried_runs"] == 0

    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.push_screen(ExperimentScreen(created["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: screen.detail and len(screen.detail.scenarios) == 2, what="the scenario rows")
        await wait_for(pilot, lambda: "↻ 1 retried" in screen_text(app), what="the summary's retries")
        rows = [line for line in screen_text(app).splitlines() if "mode=" in line]
        assert ["↻1" in line for line in rows] == [True, False], rows  # the retried replica's row, not the clean one
        screen.table.move_cursor(row=0)
        await wait_for(pilot, lambda: f"retried 1× after infrastructure errors (earlier attempts {first})" in screen_text(app),
                       what="the row's detail line")
        await pilot.press("enter")
        run = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, RunScreen) else None, what="the run view")
        assert run.run_id == retried["runs"][0]["run_id"]
        await wait_for(pilot, lambda: f"↻ retried 1× after infrastructure errors ({first})" in screen_text(app),
                       what="the run view's retry line")
