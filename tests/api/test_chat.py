"""Team chat (Slack): the install flow against a real local Slack Web API server, and signed
Events API deliveries answered by the investigation agent (a real local OpenAI server) in the
mention's thread."""
from __future__ import annotations

import json
import time
from urllib.parse import parse_qs, urlparse

import pytest

from daemon.app import create_app
from daemon.chat import oauth
from daemon.chat.bot import BOT
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, slack_app_settings
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.slack_signing import app_mention, body_of, signed_headers, url_verification
from tests.support.waiting import wait_for
from daemon.appkeys import DEFAULT_TENANT_ID, SETTINGS, STORE


@pytest.fixture
def llm():
    with OpenAIServer() as server:
        server.respond = lambda body: Reply(content="exp-1 failed because invariant wrote found no hello.txt (run run-1).")
        yield server


@pytest.fixture
async def chat(aiohttp_client, tmp_path, slack, llm):
    settings = slack_app_settings(tmp_path / "home", slack, llm, chat_authorize_url="https://slack.example/oauth/v2/authorize")
    return await api_on(aiohttp_client, create_app(settings))


async def install_url_state(api) -> str:
    response, body = await api.get("/v1/chat/install-url")
    assert response.status == 200, body
    return parse_qs(urlparse(body["url"]).query)["state"][0]


async def callback(api, code: str, state: str):
    response = await api.client.get("/v1/chat/oauth/callback", params={"code": code, "state": state}, allow_redirects=False)
    await response.read()
    return response


async def installations(api) -> list[dict]:
    return [dict(r) for r in await api.app[STORE].fetchall("SELECT team_id, tenant_id FROM chat_installations")]


async def install(api, slack, code: str = "code-1", team: str = "T0ACME") -> None:
    slack.grant(code, team_id=team)
    response = await callback(api, code, await install_url_state(api))
    assert response.status == 302


async def deliver(api, payload: dict, secret: str = SIGNING_SECRET, timestamp: int | None = None, retry: int | None = None,
                  signature: str | None = None):
    body = body_of(payload)
    headers = signed_headers(secret, body, timestamp, retry)
    if signature is not None:
        headers["X-Slack-Signature"] = signature
    response = await api.client.post("/v1/chat/events", data=body, headers=headers)
    return response, await response.json()


async def settled(api) -> None:
    """Every accepted event has been handled (events are acknowledged first, handled after)."""
    await wait_for(lambda: api.app[BOT].idle(), what="chat events handled")


# --- install -----------------------------------------------------------------------------------------


async def test_install_url_carries_client_id_bot_scopes_and_a_state(chat, slack):
    response, body = await chat.get("/v1/chat/install-url")
    query = parse_qs(urlparse(body["url"]).query)
    assert (query["client_id"], set(query["scope"][0].split(",")) >= {"app_mentions:read", "chat:write"}, len(query["state"])) == \
        ([slack.client_id], True, 1)


async def test_install_url_needs_the_api_key(chat):
    response = await chat.client.get("/v1/chat/install-url")
    assert response.status == 401


async def test_callback_stores_exactly_one_mapping_and_redirects_installed(chat, slack):
    slack.grant("code-1", team_id="T0ACME")
    response = await callback(chat, "code-1", await install_url_state(chat))
    location = response.headers["Location"]
    assert (response.status, parse_qs(urlparse(location).query)["chat"], await installations(chat)) == \
        (302, ["installed"], [{"team_id": "T0ACME", "tenant_id": chat.app[DEFAULT_TENANT_ID]}])


async def test_reinstall_of_the_same_workspace_keeps_one_mapping(chat, slack):
    await install(chat, slack, "code-1")
    await install(chat, slack, "code-2")
    assert len(await installations(chat)) == 1


async def test_a_state_works_once(chat, slack):
    state = await install_url_state(chat)
    slack.grant("code-1")
    await callback(chat, "code-1", state)
    slack.grant("code-2", team_id="T0OTHER")
    response = await callback(chat, "code-2", state)
    assert (response.status, [i["team_id"] for i in await installations(chat)]) == (403, ["T0ACME"])


async def test_forged_state_is_an_invalid_state_page_and_stores_nothing(chat, slack, other_tenant_key):
    state = await install_url_state(chat)
    payload, signature = state.split(".")
    forged = oauth._b64(json.dumps({"n": "x", "t": "someone-else", "e": time.time() + 600}).encode()) + "." + signature
    slack.grant("code-1")
    response = await callback(chat, "code-1", forged)
    assert (response.status, "Invalid state" in await response.text(), await installations(chat)) == (403, True, [])


async def test_state_signed_before_the_client_secret_changed_is_invalid(chat, slack):
    state = await install_url_state(chat)
    chat.app[SETTINGS].chat_client_secret = "rotated-client-secret"
    slack.grant("code-1")
    response = await callback(chat, "code-1", state)
    assert (response.status, await installations(chat)) == (403, [])


def test_a_state_expires_after_15_minutes():
    state, _, _ = oauth.new_state("client-secret", "tenant-1", now=1_000_000)
    with pytest.raises(oauth.InvalidState):
        oauth.check_state("client-secret", state, now=1_000_000 + 15 * 60 + 1)


async def test_a_refused_code_stores_nothing(chat, slack):
    response = await callback(chat, "never-granted", await install_url_state(chat))
    assert (response.status, await installations(chat)) == (502, [])


# --- events ------------------------------------------------------------------------------------------


async def test_url_verification_echoes_the_challenge(chat):
    response, body = await deliver(chat, url_verification("abc123"))
    assert (response.status, body) == (200, {"challenge": "abc123"})


async def test_a_mention_is_answered_in_its_thread(chat, slack):
    await install(chat, slack)
    await deliver(chat, app_mention("why did exp-1 fail?", channel="C0INC", ts="1700000100.000200"))
    await settled(chat)
    [reply] = slack.thread("C0INC", "1700000100.000200")
    assert "exp-1 failed" in reply["text"]


async def test_a_mention_inside_a_thread_is_answered_in_that_thread(chat, slack):
    await install(chat, slack)
    await deliver(chat, app_mention("and now?", channel="C0INC", ts="1700000200.000300", thread_ts="1700000100.000200"))
    await settled(chat)
    assert [m["thread_ts"] for m in slack.posted] == ["1700000100.000200"]


async def test_a_retried_event_adds_no_reply(chat, slack):
    await install(chat, slack)
    mention = app_mention("why did exp-1 fail?", channel="C0INC", ts="1700000100.000200")
    await deliver(chat, mention)
    await settled(chat)
    response, _ = await deliver(chat, mention, retry=1)
    await settled(chat)
    assert (response.status, len(slack.posted)) == (200, 1)


async def test_a_duplicate_delivery_of_the_same_message_adds_no_reply(chat, slack):
    await install(chat, slack)
    await deliver(chat, app_mention("why?", channel="C0INC", ts="1700000100.000200", event_id="Ev1"))
    await deliver(chat, app_mention("why?", channel="C0INC", ts="1700000100.000200", event_id="Ev2"))
    await settled(chat)
    assert len(slack.posted) == 1


async def test_a_second_mention_resumes_the_conversation_with_its_history(chat, slack, llm):
    await install(chat, slack)
    await deliver(chat, app_mention("why did exp-1 fail?", channel="C0INC", ts="1700000100.000200"))
    await settled(chat)
    await deliver(chat, app_mention("what about exp-2?", channel="C0INC", ts="1700000300.000400", thread_ts="1700000100.000200"))
    await settled(chat)
    seen = [m.get("content") for m in llm.requests[-1]["body"]["messages"]]
    assert seen[1:] == ["why did exp-1 fail?", "exp-1 failed because invariant wrote found no hello.txt (run run-1).",
                        "what about exp-2?"]


async def test_a_thread_is_one_conversation_tagged_with_its_chat_key(chat, slack):
    await install(chat, slack)
    await deliver(chat, app_mention("first", channel="C0INC", ts="1700000100.000200"))
    await settled(chat)
    await deliver(chat, app_mention("second", channel="C0INC", ts="1700000300.000400", thread_ts="1700000100.000200"))
    await settled(chat)
    response, body = await chat.get("/v1/conversations")
    assert [(c["metadata"]["chat_key"], c["message_count"]) for c in body["items"]] == [("T0ACME:C0INC:1700000100.000200", 4)]


async def test_an_empty_mention_gets_the_help_reply(chat, slack, llm):
    await install(chat, slack)
    await deliver(chat, app_mention("", channel="C0INC", ts="1700000100.000200"))
    await settled(chat)
    assert ("Ask me about your evaluations" in slack.posted[0]["text"], len(llm.requests)) == (True, 0)


async def test_a_model_failure_is_reported_in_the_thread(chat, slack, llm):
    await install(chat, slack)
    llm.script(Reply(status=500))
    await deliver(chat, app_mention("why?", channel="C0INC", ts="1700000100.000200"))
    await settled(chat)
    assert "The investigation model failed (server_error)" in slack.posted[0]["text"]


async def test_the_bots_own_messages_are_ignored(chat, slack, llm):
    await install(chat, slack)
    await deliver(chat, app_mention("echo", channel="C0INC", ts="1700000100.000200", user="U0SVCBOT"))
    await settled(chat)
    assert (slack.posted, llm.requests) == ([], [])


async def test_a_stale_request_is_401_and_does_nothing(chat, slack, llm):
    await install(chat, slack)
    response, _ = await deliver(chat, app_mention("why?", ts="1700000100.000200"), timestamp=int(time.time()) - 6 * 60)
    await settled(chat)
    events = await chat.app[STORE].fetchall("SELECT * FROM chat_events")
    assert (response.status, slack.posted, llm.requests, events) == (401, [], [], [])


async def test_a_forged_signature_is_401_and_does_nothing(chat, slack, llm):
    await install(chat, slack)
    response, _ = await deliver(chat, app_mention("why?", ts="1700000100.000200"), secret="not-the-signing-secret")
    await settled(chat)
    assert (response.status, slack.posted, llm.requests) == (401, [], [])


async def test_an_unsigned_request_is_401(chat):
    response = await chat.client.post("/v1/chat/events", data=body_of(url_verification()), headers={"Content-Type": "application/json"})
    assert response.status == 401


async def test_an_oversized_event_is_413(chat):
    payload = url_verification("x")
    payload["padding"] = "a" * (300 * 1024)
    response, _ = await deliver(chat, payload)
    assert response.status == 413


async def test_a_workspace_nobody_installed_gets_no_reply(chat, slack, llm):
    await deliver(chat, app_mention("why?", team="T0STRANGER", ts="1700000100.000200"))
    await settled(chat)
    assert (slack.posted, llm.requests) == ([], [])


async def test_status_lists_the_workspace_without_its_token(chat, slack):
    await install(chat, slack)
    await deliver(chat, app_mention("", channel="C0INC", ts="1700000100.000200"))
    await settled(chat)
    response, body = await chat.get("/v1/chat/status")
    assert ([i["team_id"] for i in body["installations"]], body["last_event_at"] is not None, "xoxb-" in json.dumps(body)) == \
        (["T0ACME"], True, False)


async def test_status_shows_another_tenant_nothing(chat, slack, other_tenant_key):
    await install(chat, slack)
    response, body = await chat.get("/v1/chat/status", key=other_tenant_key)
    assert body["installations"] == []


async def test_a_first_mention_mid_thread_gives_the_model_the_threads_earlier_messages(chat, slack, llm):
    await install(chat, slack)
    slack.say("C0INC", "1700000100.000200", "the nightly run exp-7 broke after the prompt change")
    await deliver(chat, app_mention("why?", channel="C0INC", ts="1700000300.000400", thread_ts="1700000100.000200"))
    await settled(chat)
    question = llm.requests[0]["body"]["messages"][-1]["content"]
    assert "exp-7 broke after the prompt change" in question


async def test_status_says_when_slack_no_longer_accepts_the_bot(chat, slack):
    await install(chat, slack)
    slack.tokens.clear()  # the app was uninstalled on Slack's side
    response, body = await chat.get("/v1/chat/status")
    assert [(i["bot_ok"], i["bot_error"]) for i in body["installations"]] == [(False, "invalid_auth")]


async def test_install_url_without_an_oauth_app_is_409_not_configured(api):
    response, body = await api.get("/v1/chat/install-url")
    assert (response.status, body["details"]["state"]) == (409, "not_configured")
