"""POST /v1/chat/interactions: a click on the alert message's "Copy debug context" button (signed by
Slack like events) posts the debug context as plain JSON in that message's thread."""
from __future__ import annotations

import json
import time

import pytest

from daemon.app import create_app
from daemon.chat.bot import BOT
from daemon.chat.notify import post_alert
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, install_workspace, slack_app_settings
from tests.support.slack_server import SlackServer
from tests.support.slack_signing import block_actions, form_body, signed_headers
from tests.support.waiting import wait_for
from daemon.appkeys import DEFAULT_TENANT_ID

SERVER_BOT = "xoxb-server-wide-bot-token"
ALERT = {"rule_id": "al_1", "rule_name": "pass rate low", "reason": "pass_rate 0.4 < 0.8", "experiment_id": "exp-a1",
         "experiment_name": "nightly", "fired_at": "2026-11-23T10:00:00Z"}


@pytest.fixture
def slack():
    with SlackServer() as server:
        server.allow_token(SERVER_BOT, team_id="T0ADMIN")
        yield server


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack, llm):
    settings = slack_app_settings(tmp_path / "home", slack, llm, chat_bot_token=SERVER_BOT)
    return await api_on(aiohttp_client, create_app(settings))


async def click(api, payload: dict, secret: str = SIGNING_SECRET, timestamp: int | None = None):
    body = form_body(payload)
    headers = {**signed_headers(secret, body, timestamp), "Content-Type": "application/x-www-form-urlencoded"}
    response = await api.client.post("/v1/chat/interactions", data=body, headers=headers)
    await response.read()
    await wait_for(lambda: api.app[BOT].idle(), what="chat clicks handled")
    return response


def debug_json(reply: dict) -> dict:
    return json.loads(reply["text"].split("```")[1])


async def test_the_debug_button_posts_the_context_json_in_the_alerts_thread(api, slack):
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    alert = slack.posted[0]
    await click(api, block_actions(alert, "svc_debug_context", team="T0ADMIN"))
    reply = slack.posted[1]
    assert (reply["channel"], reply["thread_ts"], debug_json(reply)["rule_id"]) == ("C0ALERTS", alert["ts"], "al_1")


async def test_an_installed_workspace_is_answered_with_its_own_bot(api, slack):
    token = await install_workspace(api, slack, team="T0ACME")
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    await click(api, block_actions(slack.posted[0], "svc_debug_context", team="T0ACME"))
    assert [p["token"] for p in slack.posted] == [token, token]


async def test_a_forged_click_is_401_and_posts_nothing(api, slack):
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    response = await click(api, block_actions(slack.posted[0], "svc_debug_context", team="T0ADMIN"), secret="not-the-secret")
    assert (response.status, len(slack.posted)) == (401, 1)


async def test_a_stale_click_is_401(api, slack):
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    response = await click(api, block_actions(slack.posted[0], "svc_debug_context", team="T0ADMIN"),
                           timestamp=int(time.time()) - 6 * 60)
    assert response.status == 401


async def test_the_open_trace_link_needs_no_reply(api, slack):
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    response = await click(api, block_actions(slack.posted[0], "svc_open_trace", team="T0ADMIN"))
    assert (response.status, len(slack.posted)) == (200, 1)


async def test_a_click_from_a_workspace_without_a_bot_here_posts_nothing(api, slack):
    await post_alert(api.app, api.app[DEFAULT_TENANT_ID], "C0ALERTS", ALERT)
    response = await click(api, block_actions(slack.posted[0], "svc_debug_context", team="T0STRANGER"))
    assert (response.status, len(slack.posted)) == (200, 1)


async def test_a_body_without_a_payload_is_400_naming_it(api):
    body = b"nothing=here"
    headers = {**signed_headers(SIGNING_SECRET, body), "Content-Type": "application/x-www-form-urlencoded"}
    response = await api.client.post("/v1/chat/interactions", data=body, headers=headers)
    assert (response.status, (await response.json())["details"]["errors"][0]["loc"]) == (400, "payload")


async def test_a_payload_over_its_limit_is_400_naming_the_limit(api):
    body = form_body({"type": "block_actions", "padding": "a" * 50_000})
    headers = {**signed_headers(SIGNING_SECRET, body), "Content-Type": "application/x-www-form-urlencoded"}
    response = await api.client.post("/v1/chat/interactions", data=body, headers=headers)
    answer = await response.json()
    assert (response.status, "49152" in answer["message"]) == (400, True)
