"""The dashboard and the app shell against a real daemon (no sandboxes needed): rows appear live,
filters filter, keys open screens, help shows the bindings, the palette runs actions, errors are
notifications, the header shows the connection and the app reconnects after a daemon restart."""
from __future__ import annotations

from tests.support.tui import make_app, screen_text, upload_spec, wait_for
from tui.screens.dashboard import DashboardScreen
from tui.screens.experiment import ExperimentScreen
from tui.screens.help import HelpScreen


async def create(api, spec_id: str, name: str) -> dict:
    return await api.post("/v1/experiments", {"spec_id": spec_id, "name": name})


def table_names(app) -> list[str]:
    screen = app.screen
    assert isinstance(screen, DashboardScreen), type(screen)
    return [screen.rows[key].name for key in screen.table.keys]


async def test_rows_appear_and_update_live_without_a_key(daemon, api):
    await upload_spec(api, "alpha")
    await create(api, "alpha", "first")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: table_names(app) == ["first"], what="the first experiment")
        assert "first" in screen_text(app) and "created" in screen_text(app)
        second = await create(api, "alpha", "second")  # created while the dashboard is open
        await wait_for(pilot, lambda: "second" in table_names(app), what="the live update")
        assert table_names(app)[0] == "second"  # newest first
        await api.post(f"/v1/experiments/{second['id']}/cancel")
        await wait_for(pilot, lambda: app.screen.rows[second["id"]].status == "cancelled", what="the status change")
        assert "cancelled" in screen_text(app)


async def test_filter_sort_and_enter(daemon, api):
    await upload_spec(api, "alpha")
    await upload_spec(api, "beta")
    for spec, name in (("alpha", "nightly-alpha"), ("beta", "nightly-beta"), ("alpha", "adhoc")):
        await create(api, spec, name)
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: len(table_names(app)) == 3, what="three rows")
        await pilot.press("slash", *"beta")
        await wait_for(pilot, lambda: table_names(app) == ["nightly-beta"], what="the filter")
        assert "adhoc" not in screen_text(app)
        await pilot.press("enter")  # keep the filter, back to the table
        await pilot.press("escape")  # clear it
        await wait_for(pilot, lambda: len(table_names(app)) == 3, what="the cleared filter")
        await pilot.press("slash", *"zzz", "enter")
        await wait_for(pilot, lambda: "No experiment matches" in screen_text(app), what="the empty-filter hint")
        await pilot.press("escape")
        await pilot.press("o")  # created -> name
        assert app.screen.sort_key == "name"
        await wait_for(pilot, lambda: table_names(app) == ["nightly-beta", "nightly-alpha", "adhoc"], what="name order (desc)")
        await pilot.press("O")
        await wait_for(pilot, lambda: table_names(app) == ["adhoc", "nightly-alpha", "nightly-beta"], what="reversed")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExperimentScreen), what="the experiment view")
        assert app.screen.experiment_id == app.screen_stack[0].table.keys[0]
        await wait_for(pilot, lambda: "adhoc" in screen_text(app), what="the experiment's name in the header")
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_help_shows_the_bindings_of_the_current_screen(daemon, api):
    await upload_spec(api, "alpha")
    await create(api, "alpha", "one")
    app = make_app(daemon)
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(pilot, lambda: table_names(app), what="a row")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for expected in ("Experiments", "Filter", "Sort", "Compare", "Everywhere", "Sandboxes", "Command palette"):
            assert expected in text, expected
        assert "Verdict filter" not in text
        await pilot.press("escape")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExperimentScreen), what="the experiment view")
        await pilot.press("question_mark")
        text = screen_text(app)
        for expected in ("Verdict filter", "Rerun failed", "Copy repro", "Compare", "Open run"):
            assert expected in text, expected
        assert "Sort" not in text.split("Everywhere")[0]


async def test_command_palette_runs_any_action(daemon, api):
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.connection == "connected", what="the connection")
        await pilot.press("ctrl+p")
        await pilot.press(*"go to sandboxes")
        await pilot.pause(0.5)
        assert "Go to: sandboxes" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "sandboxes", what="the sandboxes screen")
        await pilot.press("ctrl+p")
        await pilot.press(*"theme: high")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.theme == "high-contrast", what="the theme command")


async def test_api_errors_are_notifications_and_keep_your_place(daemon, api):
    await upload_spec(api, "alpha")
    a = await create(api, "alpha", "a")
    b = await create(api, "alpha", "b")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: len(table_names(app)) == 2, what="two rows")
        await pilot.press("down")
        selected = app.screen.table.selected_key
        await pilot.press("space")  # mark as baseline
        await pilot.press("up", "c")  # compare two experiments still `created`: the daemon says 409
        await wait_for(pilot, lambda: any("409" in (n.title or "") for n in app._notifications), what="a 409 notification")
        note = next(n for n in app._notifications if "409" in (n.title or ""))
        assert note.severity == "error" and "created" in note.message
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)
        assert {a["id"], b["id"]} == set(app.screen.table.keys) and app.screen.marked == selected
        app.push_screen(ExperimentScreen("exp-does-not-exist"))
        await wait_for(pilot, lambda: any("404" in (n.title or "") for n in app._notifications), what="a 404 notification")
        assert isinstance(app.screen, ExperimentScreen)  # still there, nothing popped


async def test_header_shows_connection_and_reconnects_after_restart(daemon, api):
    await upload_spec(api, "alpha")
    await create(api, "alpha", "before")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: table_names(app) == ["before"], what="a row")
        assert "● connected" in screen_text(app)
        await api.close()
        await daemon.stop()
        await wait_for(pilot, lambda: app.connection == "reconnecting", what="reconnecting")
        await wait_for(pilot, lambda: "◌ reconnecting" in screen_text(app), what="the header indicator")
        assert table_names(app) == ["before"]  # the last data stays on screen
        await daemon.start()
        again = daemon.client()
        try:
            await create(again, "alpha", "after")
            await wait_for(pilot, lambda: app.connection == "connected", timeout=15, what="reconnected")
            await wait_for(pilot, lambda: "after" in table_names(app), what="fresh data after the restart")
            assert "● connected" in screen_text(app)
            assert any("reconnected" in n.message for n in app._notifications)
        finally:
            await again.close()


async def test_mouse_clicks_sort_and_open(daemon, api):
    await upload_spec(api, "alpha")
    for name in ("b-second", "a-first"):
        await create(api, "alpha", name)
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: len(table_names(app)) == 2, what="two rows")
        table = app.screen.table
        name_x = sum(column.get_render_width(table) for column in table.ordered_columns[:1]) + 2
        await pilot.click("#experiments", offset=(name_x, 0))  # the Name header
        await wait_for(pilot, lambda: app.screen.sort_key == "name", what="sorting by a header click")
        await wait_for(pilot, lambda: table_names(app) == ["a-first", "b-second"], what="A to Z")
        await pilot.click("#experiments", offset=(name_x, 0))  # again: the other way round
        await wait_for(pilot, lambda: table_names(app) == ["b-second", "a-first"], what="Z to A")
        await pilot.click("#experiments", offset=(name_x, 1))
        await pilot.click("#experiments", offset=(name_x, 1))  # clicking the selected row opens it
        await wait_for(pilot, lambda: isinstance(app.screen, ExperimentScreen), what="the experiment view")
