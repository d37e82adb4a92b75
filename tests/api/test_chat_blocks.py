"""The `notify: chat` message as Slack receives it (a real local Slack Web API server): valid Block
Kit whatever the rule, experiment and span hold, a debug-context button whose value is plain JSON,
and no Slack control sequence from tenant text in the notification text."""
from __future__ import annotations

import json

import pytest

from daemon.app import create_app
from daemon.chat.notify import post_alert
from tests.support.api import api_on, make_settings
from tests.support.block_kit import violations
from tests.support.slack_server import SlackServer
from tests.support.store import add_experiment
from daemon.appkeys import DEFAULT_TENANT_ID

BOT_TOKEN = "xoxb-env-bot-token-value"
LONG_ALERT = {"rule_id": "al_" + "1" * 60, "rule_name": "r" * 200, "reason": "pass_rate 0.4 < 0.8 " * 400,
              "experiment_id": "exp-" + "e" * 120, "experiment_name": "n" * 200, "fired_at": "2026-11-23T10:00:00Z",
              "metric_value": 0.4, "threshold": 0.8}


@pytest.fixture
def slack():
    with SlackServer() as server:
        server.allow_token(BOT_TOKEN)
        yield server


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack):
    return await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", chat_api_base=slack.url, chat_bot_token=BOT_TOKEN)))


async def long_span(api) -> None:
    await add_experiment(api, LONG_ALERT["experiment_id"])  # trace events may name only an experiment that exists
    response, body = await api.post("/v1/traces", json={"events": [
        {"event_type": "llm_call", "tool": "t" * 200, "trace_id": "trace-" + "a" * 100, "span_id": "span-" + "b" * 100,
         "experiment_id": LONG_ALERT["experiment_id"], "duration_ms": 1234, "status": "error",
         "cost": {"model": "m" * 200, "input_tokens": 1000, "output_tokens": 100}}]})
    assert response.status == 202, body


def debug_value(message: dict) -> str:
    return next(e["value"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]
                if e["action_id"] == "svc_debug_context")


async def test_an_alert_with_the_longest_values_is_valid_block_kit(api, slack):
    await long_span(api)
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", LONG_ALERT)
    assert violations(slack.posted[0]["blocks"]) == []


async def test_the_debug_context_of_the_longest_alert_is_json_with_its_ids(api, slack):
    await long_span(api)
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", LONG_ALERT)
    context = json.loads(debug_value(slack.posted[0]))
    assert (context["rule_id"], context["experiment_id"], context["trace_id"]) == (
        LONG_ALERT["rule_id"], LONG_ALERT["experiment_id"], "trace-" + "a" * 100)


def test_a_debug_context_too_long_for_a_button_stays_json():
    from daemon.chat.blocks import debug_context

    value = debug_context({"rule_id": "al_1", "rule_name": "x" * 2500, "experiment_name": "y" * 2500, "reason": "z" * 2500}, None)
    assert (len(value) <= 2000, json.loads(value)["rule_id"]) == (True, "al_1")


async def test_a_rule_name_cannot_notify_the_channel(api, slack):
    _, rule = await api.post("/v1/alerts", json={"name": "<!channel> <@U0BOSS> pass rate", "condition": "pass_rate < 0.8",
                                                 "notify": "chat", "slack_channel": "#evals"})
    response, body = await api.post(f"/v1/alerts/{rule['id']}/test")
    assert response.status == 202, body
    assert ("<!channel>" in slack.posted[0]["text"], "<@U0BOSS>" in slack.posted[0]["text"]) == (False, False)


async def test_the_trace_link_opens_at_the_configured_address(aiohttp_client, tmp_path, slack):
    settings = make_settings(tmp_path / "home", chat_api_base=slack.url, chat_bot_token=BOT_TOKEN,
                             chat_link_base="https://svc.example.com/")
    api = await api_on(aiohttp_client, create_app(settings))
    await long_span(api)
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", LONG_ALERT)
    link = next(e["url"] for b in slack.posted[0]["blocks"] if b["type"] == "actions" for e in b["elements"] if "url" in e)
    assert link == "https://svc.example.com/v1/traces/trace-" + "a" * 100
