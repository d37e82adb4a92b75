"""The experiment screen of a running experiment reloads from its event stream, not on a timer: while
the stream is up and nothing happens it asks the daemon nothing, and a finished replica reaches the
screen through the stream's event. The real daemon app (a scenario runner that holds its run until
the test lets it go, no Docker), the real client and the Textual pilot."""
from __future__ import annotations

import asyncio
import warnings

from daemon.appkeys import RUN_SCENARIO
from tests.support.experiments import FakeRunner
from tests.support.specs import spec_yaml
from tests.support.tui import make_app, screen_text, upload_spec, wait_for
from tui.screens.experiment import ExperimentScreen

QUIET_S = 5.0  # more than two poll intervals (SvcScreen.POLL_S = 2 s)


async def test_a_followed_experiment_reloads_on_its_events_not_every_two_seconds(daemon, api):
    runner = FakeRunner()
    with warnings.catch_warnings():  # the started app's scenario runner, swapped before anything runs
        warnings.simplefilter("ignore", DeprecationWarning)
        daemon.app[RUN_SCENARIO] = runner
    await upload_spec(api, "held", spec_yaml("held", matrix=[{"mode": "block"}]))
    created = await api.post("/v1/experiments", {"spec_id": "held", "name": "held"})
    await api.post(f"/v1/experiments/{created['id']}/run", {})
    await asyncio.wait_for(runner.started.wait(), 10)

    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        loads = 0
        fetch = app.backend.experiment

        async def counted(experiment_id):
            nonlocal loads
            loads += 1
            return await fetch(experiment_id)

        app.backend.experiment = counted
        await app.push_screen(ExperimentScreen(created["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: screen.streams_live() and loads >= 1, what="the screen following its stream")
        await pilot.pause(0.5)  # the first load's own follow-up, if any
        before = loads
        await pilot.pause(QUIET_S)
        quiet = loads - before
        runner.release.set()
        await wait_for(pilot, lambda: "completed" in screen_text(app), timeout=15, what="the finished experiment")
        assert (quiet, loads > before) == (0, True)
