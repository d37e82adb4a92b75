"""The TUI dashboard shows the alert rules that are firing (real daemon app on a Unix socket, the
real client, Textual's Pilot)."""
from __future__ import annotations

import pytest

from tests.support.tui import make_app, served_daemon, screen_text, wait_for
from daemon.appkeys import STORE


@pytest.fixture
async def daemon(tmp_path):
    async with served_daemon(tmp_path / "home", "svcal") as d:
        yield d


async def test_dashboard_lists_firing_rules_only(daemon, monkeypatch):
    monkeypatch.delenv("SERVICE_THEME", raising=False)
    async with daemon.client() as api:
        for name in ("cost guard", "quiet rule"):
            await api.post("/v1/alerts", {"name": name, "condition": "total_cost_usd > 5", "notify": "webhook",
                                          "webhook_url": "http://127.0.0.1:9/h"})
    # what an evaluation after a costly experiment leaves on the rule
    await daemon.app[STORE].execute("UPDATE alert_rules SET state = 'firing' WHERE name = 'cost guard'")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "firing: cost guard (total_cost_usd > 5)" in screen_text(app), what="the firing line")
        assert "quiet rule" not in screen_text(app)
