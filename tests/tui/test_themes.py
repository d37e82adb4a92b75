"""Themes: the three bundled ones load from themes/, `--theme` and SERVICE_THEME choose, the picker
previews live (moving through the list recolours the app at once) and esc restores the previous
one; semantic colours (verdicts) follow the theme."""
from __future__ import annotations

import pytest

from tests.support.tui import make_app, upload_spec, wait_for
from tui.screens.theme_picker import ThemePicker
from tui.themes import choose, load_themes


def background(app) -> str:
    return app.screen.styles.background.hex.upper()


def test_bundled_themes_load_with_their_css():
    themes, css = load_themes()
    assert {"dark", "light", "high-contrast"} <= set(themes)
    assert themes["light"].dark is False and themes["high-contrast"].background == "#000000"
    assert {p.stem for p in css} >= {"dark", "light", "high-contrast"}


def test_choice_order_flag_then_env_then_default(monkeypatch):
    names = ["dark", "light", "high-contrast"]
    monkeypatch.setenv("SERVICE_THEME", "light")
    assert choose(None, names) == "light"
    assert choose("high-contrast", names) == "high-contrast"
    assert choose("no-such-theme", names) == "dark"
    monkeypatch.delenv("SERVICE_THEME")
    assert choose(None, names) == "dark"


@pytest.mark.parametrize("name", ["dark", "light", "high-contrast"])
async def test_theme_flag_colours_the_app(daemon, name):
    app = make_app(daemon, theme=name)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert app.theme == name and app.has_class(f"theme-{name}")
        assert background(app) == app.get_theme(name).background.upper()


async def test_service_theme_env(daemon, monkeypatch):
    monkeypatch.setenv("SERVICE_THEME", "high-contrast")
    app = make_app(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.1)
        assert app.theme == "high-contrast" and background(app) == "#000000"


async def test_picker_previews_live_and_esc_restores(daemon, api):
    await upload_spec(api, "alpha")
    created = await api.post("/v1/experiments", {"spec_id": "alpha", "name": "one"})
    await api.post(f"/v1/experiments/{created['id']}/cancel")
    app = make_app(daemon, theme="dark")
    async with app.run_test(size=(100, 30)) as pilot:
        dashboard = app.screen
        await wait_for(pilot, lambda: dashboard.rows, what="a row")
        dark_bg = background(app)
        status_cell = lambda: dashboard.table.get_row(created["id"])[0]  # noqa: E731
        dark_status = status_cell().style
        await pilot.press("t")
        assert isinstance(app.screen, ThemePicker)
        await pilot.press("down")  # dark -> light, applied at once
        await wait_for(pilot, lambda: app.theme == "light", what="the preview")
        await pilot.pause(0.2)
        assert app.screen_stack[0].styles.background.hex.upper() == app.get_theme("light").background.upper() != dark_bg
        assert status_cell().style != dark_status  # verdict colours re-painted from the new theme
        await pilot.press("down")
        await wait_for(pilot, lambda: app.theme == "high-contrast", what="the second preview")
        await pilot.press("escape")  # cancel: back to what we had
        await wait_for(pilot, lambda: app.theme == "dark", what="the revert")
        assert background(app) == dark_bg and status_cell().style == dark_status
        await pilot.press("t", "down", "down", "enter")
        await wait_for(pilot, lambda: app.theme == "high-contrast" and not isinstance(app.screen, ThemePicker), what="the choice")
        assert background(app) == "#000000"
