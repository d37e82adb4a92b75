"""The TUI dashboard shows the alert rules that are firing: a real daemon app whose experiment (the
fake scenario runner) is evaluated against two rules, the real client over HTTP, Textual's Pilot."""
from __future__ import annotations

import pytest

from client.config import ClientConfig
from tests.support.experiments import run_experiment, start, upload
from tests.support.specs import spec_yaml
from tests.support.tui import screen_text, wait_for
from tests.support.waiting import wait_for as wait_until


async def evaluated(api) -> bool:
    _, page = await api.get("/v1/alerts")
    return all(r["state"] != "no_data" for r in page["items"])


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


async def test_dashboard_lists_firing_rules_only(api, monkeypatch):
    from tui.app import SvcApp

    monkeypatch.delenv("SERVICE_THEME", raising=False)
    for name, condition in (("pass guard", "pass_rate < 0.8"), ("quiet rule", "pass_rate < 0")):
        response, body = await api.post("/v1/alerts", json={"name": name, "condition": condition, "notify": "webhook",
                                                            "webhook_url": "http://127.0.0.1:9/h"})
        assert response.status == 201, body
    await upload(api, spec_yaml(matrix=[{"mode": "fail"}]))
    await run_experiment(api, name="nightly", spec_id="demo")
    await wait_until(lambda: evaluated(api), what="both rules evaluated")
    app = SvcApp(ClientConfig(base_url=api.base_url(), api_key=api.key, timeout=10.0, home=api.home, api_key_source="test"))
    app.HEALTH_EVERY_S, app.RETRY_EVERY_S = 0.2, 0.1
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "firing: pass guard (pass_rate < 0.8)" in screen_text(app), what="the firing line")
        assert "quiet rule" not in screen_text(app)
