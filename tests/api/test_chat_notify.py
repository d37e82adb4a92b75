"""Chat alerts (`notify: chat`): daemon/chat/notify.post_alert posts SPEC's block message to a real
local Slack Web API server with the tenant's bot, or says why it cannot."""
from __future__ import annotations

import json

import pytest

from daemon.app import create_app
from daemon.chat.notify import ChatSendError, ChatUnavailable, post_alert
from tests.support.api import api_on, make_settings
from tests.support.openai_server import Reply
from tests.support.slack_server import SlackServer
from tests.support.store import add_experiment
from daemon.appkeys import DEFAULT_TENANT_ID

BOT_TOKEN = "xoxb-env-bot-token-value"
ALERT = {"rule_id": "al_1", "rule_name": "pass rate <script>", "reason": "pass_rate 0.4 < 0.8", "experiment_id": "exp-a1",
         "experiment_name": "nightly", "fired_at": "2026-11-23T10:00:00Z", "metric_value": 0.4, "threshold": 0.8}


@pytest.fixture
def slack():
    with SlackServer() as server:
        server.allow_token(BOT_TOKEN)
        yield server


async def chat_api(aiohttp_client, tmp_path, slack, **overrides):
    settings = make_settings(tmp_path / "home", chat_api_base=slack.url, **overrides)
    return await api_on(aiohttp_client, create_app(settings))


async def ingest_failing_span(api) -> None:
    await add_experiment(api, "exp-a1")
    response, body = await api.post("/v1/traces", json={"events": [
        {"event_type": "llm_call", "tool": "chat", "trace_id": "trace-aa1", "span_id": "span-1", "experiment_id": "exp-a1",
         "duration_ms": 1234, "status": "error", "error_type": "timeout", "cost": {"model": "gpt-4o", "input_tokens": 1000,
                                                                                   "output_tokens": 100}}]})
    assert response.status == 202, body


async def test_alert_posts_summary_span_card_link_and_debug_button(aiohttp_client, tmp_path, slack):
    api = await chat_api(aiohttp_client, tmp_path, slack, chat_bot_token=BOT_TOKEN)
    await ingest_failing_span(api)
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    [message] = slack.posted
    text = json.dumps(message["blocks"])
    button = message["blocks"][-1]["elements"][1]
    assert (message["channel"], "gpt-4o" in text, "1234 ms" in text, "/v1/traces/trace-aa1" in text,
            "&lt;script&gt;" in text, json.loads(button["value"])["span_id"]) == ("C0ALERTS", True, True, True, True, "span-1")


async def test_alert_carries_a_generated_diagnosis_when_a_model_is_configured(aiohttp_client, tmp_path, slack, llm):
    llm.script(Reply(content="The model call timed out in span span-1."))
    api = await chat_api(aiohttp_client, tmp_path, slack, chat_bot_token=BOT_TOKEN, llm_base_url=llm.url)
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    assert "timed out in span span-1" in json.dumps(slack.posted[0]["blocks"])


async def test_alert_without_a_bot_is_chat_unavailable(aiohttp_client, tmp_path, slack):
    api = await chat_api(aiohttp_client, tmp_path, slack)
    with pytest.raises(ChatUnavailable):
        await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)


async def test_slack_server_error_is_a_retryable_send_error(aiohttp_client, tmp_path, slack):
    api = await chat_api(aiohttp_client, tmp_path, slack, chat_bot_token=BOT_TOKEN)
    slack.fail("chat.postMessage", status=503)
    with pytest.raises(ChatSendError) as raised:
        await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    assert raised.value.retryable is True


async def test_unknown_channel_is_a_final_send_error_without_the_token(aiohttp_client, tmp_path, slack):
    api = await chat_api(aiohttp_client, tmp_path, slack, chat_bot_token=BOT_TOKEN)
    slack.fail("chat.postMessage", error="channel_not_found")
    with pytest.raises(ChatSendError) as raised:
        await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0NOPE", ALERT)
    assert (raised.value.retryable, BOT_TOKEN in str(raised.value)) == (False, False)
