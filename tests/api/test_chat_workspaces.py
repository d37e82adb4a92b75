"""A Slack workspace belongs to the tenant that installed it: another tenant's install of it is
refused (a 409 page, nothing stored) until Slack reports the app uninstalled there, which removes
the mapping and its bot token."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from daemon.app import create_app
from daemon.chat.bot import BOT
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, install_workspace, slack_app_settings
from tests.support.slack_signing import body_of, signed_headers
from tests.support.waiting import wait_for
from daemon.appkeys import STORE


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack, llm):
    return await api_on(aiohttp_client, create_app(slack_app_settings(tmp_path / "home", slack, llm)))


async def other_install(api, slack, key: str, code: str = "code-2"):
    slack.grant(code, team_id="T0ACME")
    _, body = await api.get("/v1/chat/install-url", key=key)
    state = parse_qs(urlparse(body["url"]).query)["state"][0]
    response = await api.client.get("/v1/chat/oauth/callback", params={"code": code, "state": state}, allow_redirects=False)
    await response.read()
    return response


async def owners(api) -> list[str]:
    rows = await api.app[STORE].fetchall("SELECT t.name FROM chat_installations c JOIN tenants t ON t.id = c.tenant_id")
    return [r["name"] for r in rows]


async def slack_says(api, event: dict) -> None:
    body = body_of({"token": "x", "team_id": "T0ACME", "api_app_id": "A0SVCAPP", "type": "event_callback", "event_id": "EvUNINST1",
                    "event_time": 1, "event": event})
    response = await api.client.post("/v1/chat/events", data=body, headers=signed_headers(SIGNING_SECRET, body))
    assert response.status == 200
    await wait_for(lambda: api.app[BOT].idle(), what="chat events handled")


async def test_another_tenant_cannot_take_over_an_installed_workspace(api, slack, other_tenant_key):
    await install_workspace(api, slack)
    response = await other_install(api, slack, other_tenant_key)
    assert (response.status, await owners(api)) == (409, ["default"])


async def test_the_owner_reinstalling_keeps_one_mapping(api, slack):
    await install_workspace(api, slack, code="code-1")
    await install_workspace(api, slack, code="code-2")
    assert await owners(api) == ["default"]


async def test_app_uninstalled_removes_the_mapping(api, slack):
    await install_workspace(api, slack)
    await slack_says(api, {"type": "app_uninstalled", "event_ts": "1700000000.000100"})
    assert await owners(api) == []


async def test_revoked_user_tokens_alone_keep_the_bot(api, slack):
    await install_workspace(api, slack)
    await slack_says(api, {"type": "tokens_revoked", "tokens": {"oauth": ["U0ALICE"], "bot": []}, "event_ts": "1700000000.000100"})
    assert await owners(api) == ["default"]


async def test_after_the_uninstall_another_tenant_may_install(api, slack, other_tenant_key):
    await install_workspace(api, slack)
    await slack_says(api, {"type": "tokens_revoked", "tokens": {"bot": ["U0SVCBOT"]}, "event_ts": "1700000000.000100"})
    response = await other_install(api, slack, other_tenant_key)
    assert (response.status, await owners(api)) == (302, ["acme"])
