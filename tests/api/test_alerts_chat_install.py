"""`notify: chat` before the chat integration is installed: the notification is stored, and once the
tenant installs the app (the real OAuth flow against a local Slack server) it is posted through the
installation's bot token, once."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from tests.support.api import api_on, make_settings
from tests.support.experiments import run_experiment, upload
from tests.support.slack_server import SlackServer
from tests.support.specs import spec_yaml
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "0.05")
    monkeypatch.setenv("SERVICE_ALERT_CHAT_RETRY_S", "0.1")  # how often a stored chat notice looks for an installation


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack, runner):
    app = create_app(make_settings(tmp_path / "home", chat_client_id=slack.client_id, chat_client_secret=slack.client_secret,
                                   chat_signing_secret="slack-signing-secret-value", chat_api_base=slack.url,
                                   chat_authorize_url="https://slack.example/oauth/v2/authorize"))
    app[RUN_SCENARIO] = runner
    return await api_on(aiohttp_client, app)


async def install(api, slack: SlackServer) -> None:
    response, body = await api.get("/v1/chat/install-url")
    assert response.status == 200, body
    state = parse_qs(urlparse(body["url"]).query)["state"][0]
    slack.grant("code-1")
    response = await api.client.get("/v1/chat/oauth/callback", params={"code": "code-1", "state": state}, allow_redirects=False)
    await response.read()
    assert response.status in (200, 302, 303), response.status


async def first_delivery(api, rule_id: str, ready) -> dict:
    async def found():
        _, page = await api.get(f"/v1/alerts/{rule_id}/deliveries")
        return page["items"][0] if page["items"] and ready(page["items"][0]) else None
    return await wait_for(found, timeout=20, what="the rule's notification")


async def test_a_chat_notice_stored_before_install_is_posted_once_after_it(api, slack):
    _, rule = await api.post("/v1/alerts", json={"name": "pass rate low", "condition": "pass_rate < 0.8", "notify": "chat",
                                                 "slack_channel": "#evals"})
    await upload(api, spec_yaml(matrix=[{"mode": "fail"}]))
    await run_experiment(api, name="nightly", spec_id="demo")
    waiting = await first_delivery(api, rule["id"], lambda d: d["last_error"] is not None)
    await install(api, slack)
    sent = await first_delivery(api, rule["id"], lambda d: d["status"] == "sent")
    assert ((waiting["status"], waiting["attempts"]), sent["attempts"], [p["channel"] for p in slack.posted]) == (
        ("pending", 0), 1, ["#evals"])
