"""Channels beyond the plain webhook: chat through the chat integration's bot (a local Slack Web API
server), a slow receiver hitting the timeout, and chat incoming-webhook URLs getting block messages."""
from __future__ import annotations

import json

import pytest

from daemon.alerts.messages import blocks, is_slack_webhook
from daemon.app import create_app
from daemon.netguard import NO_ANSWER
from tests.support.api import api_on, make_settings
from tests.support.experiments import run_experiment, start, upload
from tests.support.receivers import HttpReceiver
from tests.support.slack_server import SlackServer
from tests.support.specs import spec_yaml
from tests.support.waiting import wait_for
from daemon.appkeys import RUN_SCENARIO


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "0.05")


async def settled(api, rule_id: str, timeout: float = 20.0) -> dict:
    async def first_settled():
        _, page = await api.get(f"/v1/alerts/{rule_id}/deliveries")
        return page["items"][0] if page["items"] and page["items"][0]["status"] != "pending" else None
    return await wait_for(first_settled, timeout=timeout, what="a settled delivery")


async def failing_experiment(api) -> dict:
    await upload(api, spec_yaml(matrix=[{"mode": "fail"}]))
    return await run_experiment(api, name="nightly", spec_id="demo")


async def test_chat_rule_posts_through_the_bot_to_its_channel(aiohttp_client, tmp_path, runner):
    with SlackServer() as slack:
        slack.allow_token("xoxb-alerts")
        app = create_app(make_settings(tmp_path / "home", chat_bot_token="xoxb-alerts", chat_api_base=slack.url))
        app[RUN_SCENARIO] = runner
        api = await api_on(aiohttp_client, app)
        _, rule = await api.post("/v1/alerts", json={"name": "pass rate low", "condition": "pass_rate < 0.8", "notify": "chat",
                                                     "slack_channel": "#evals"})
        await failing_experiment(api)
        delivery = await settled(api, rule["id"])
        assert (delivery["status"], [(p["channel"], "pass rate low" in p["text"]) for p in slack.posted]) == (
            "sent", [("#evals", True)])


async def test_a_receiver_slower_than_the_timeout_fails_after_three_retries(aiohttp_client, tmp_path, runner, monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_TIMEOUT_S", "0.2")
    slow = await HttpReceiver(delay=2.0).start()
    try:
        api = await start(aiohttp_client, tmp_path / "home", runner)
        _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.8", "notify": "webhook",
                                                     "webhook_url": slow.url})
        await failing_experiment(api)
        delivery = await settled(api, rule["id"])
        assert (delivery["status"], [a["error"] for a in delivery["attempt_log"]]) == ("failed", [NO_ANSWER] * 4)
    finally:
        await slow.stop()


def test_chat_incoming_webhook_urls_are_recognised():
    assert [is_slack_webhook(u) for u in ("https://hooks.slack.com/services/T0/B0/x", "http://hooks.slack.com/services/x",
                                          "https://example.com/hooks.slack.com")] == [True, False, False]


def test_block_message_carries_the_summary_and_the_numbers():
    payload = {"rule_id": "alr_1", "rule_name": "low", "reason": "pass_rate 0 < 0.8", "experiment_id": "exp_1",
               "experiment_name": "nightly", "fired_at": "2026-01-01T00:00:00Z", "metric_value": 0.0, "threshold": 0.8}
    message = blocks("alert.fired", payload)
    assert (message["text"], [b["type"] for b in message["blocks"]], message["blocks"][2]["fields"][0]["text"]) == (
        "Alert fired: low - pass_rate 0 &lt; 0.8", ["header", "section", "section", "context"], "*Value*\n0.0")


def test_block_message_shows_a_rule_named_like_a_channel_ping_as_text():
    payload = {"rule_id": "alr_1", "rule_name": "<!channel> low", "reason": "pass_rate 0 < 0.8", "experiment_id": "exp_1",
               "experiment_name": "<@U1>", "fired_at": "2026-01-01T00:00:00Z", "metric_value": 0.0, "threshold": 0.8}
    message = blocks("alert.fired", payload)
    assert "<" not in json.dumps(message)
