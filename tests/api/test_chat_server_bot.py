"""SERVICE_CHAT_BOT_TOKEN posts chat alerts for one tenant only (SERVICE_CHAT_BOT_TENANT, default the
admin tenant): another tenant's `notify: chat` rule never reaches that workspace; it needs its own install."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.slack_server import SlackServer

SERVER_BOT = "xoxb-server-wide-bot-token"


@pytest.fixture
def slack():
    with SlackServer() as server:
        server.allow_token(SERVER_BOT, team_id="T0ADMIN")
        yield server


async def server_bot_api(aiohttp_client, tmp_path, slack, **extra):
    settings = make_settings(tmp_path / "home", chat_api_base=slack.url, chat_bot_token=SERVER_BOT,
                             chat_client_id=slack.client_id, chat_client_secret=slack.client_secret, **extra)
    return await api_on(aiohttp_client, create_app(settings))


async def new_tenant(api, name: str) -> str:
    response, body = await api.post("/v1/tenants", json={"name": name})
    assert response.status == 201, body
    return body["key"]["secret"]


async def test_alert(api, key: str | None = None, channel: str = "#evals") -> dict:
    """A `notify: chat` rule of the key's tenant, and the delivery of its test notification."""
    response, rule = await api.post("/v1/alerts", json={"name": "pass rate low", "condition": "pass_rate < 0.8", "notify": "chat",
                                                        "slack_channel": channel}, key=key)
    assert response.status == 201, rule
    response, body = await api.post(f"/v1/alerts/{rule['id']}/test", key=key)
    assert response.status == 202, body
    return body["delivery"]


test_alert.__test__ = False  # a helper, not a test


async def test_another_tenants_chat_alert_does_not_post_with_the_server_bot(aiohttp_client, tmp_path, slack):
    api = await server_bot_api(aiohttp_client, tmp_path, slack)
    delivery = await test_alert(api, await new_tenant(api, "acme"))
    assert (delivery["status"], slack.posted) == ("pending", [])


async def test_the_admin_tenants_chat_alert_posts_with_the_server_bot(aiohttp_client, tmp_path, slack):
    api = await server_bot_api(aiohttp_client, tmp_path, slack)
    delivery = await test_alert(api)
    assert (delivery["status"], [p["token"] for p in slack.posted]) == ("sent", [SERVER_BOT])


async def test_the_server_bot_serves_the_tenant_service_chat_bot_tenant_names(aiohttp_client, tmp_path, slack):
    api = await server_bot_api(aiohttp_client, tmp_path, slack, chat_bot_tenant="acme")
    delivery = await test_alert(api, await new_tenant(api, "acme"))
    assert (delivery["status"], [p["token"] for p in slack.posted]) == ("sent", [SERVER_BOT])


async def test_naming_another_tenant_takes_the_server_bot_from_the_admin(aiohttp_client, tmp_path, slack):
    api = await server_bot_api(aiohttp_client, tmp_path, slack, chat_bot_tenant="acme")
    await new_tenant(api, "acme")
    delivery = await test_alert(api)
    assert (delivery["status"], slack.posted) == ("pending", [])


async def test_a_tenant_with_its_own_install_posts_with_its_own_bot(aiohttp_client, tmp_path, slack):
    api = await server_bot_api(aiohttp_client, tmp_path, slack)
    acme = await new_tenant(api, "acme")
    token = slack.grant("code-acme", team_id="T0ACME")
    _, body = await api.get("/v1/chat/install-url", key=acme)
    state = parse_qs(urlparse(body["url"]).query)["state"][0]
    response = await api.client.get("/v1/chat/oauth/callback", params={"code": "code-acme", "state": state}, allow_redirects=False)
    assert response.status == 302
    delivery = await test_alert(api, acme)
    assert (delivery["status"], [p["token"] for p in slack.posted]) == ("sent", [token])


async def test_status_tells_a_tenant_the_server_bot_is_not_its_own(aiohttp_client, tmp_path, slack):
    api = await server_bot_api(aiohttp_client, tmp_path, slack)
    acme = await new_tenant(api, "acme")
    _, admin = await api.get("/v1/chat/status")
    _, other = await api.get("/v1/chat/status", key=acme)
    assert (admin["server_bot_token"], other["server_bot_token"]) == (True, False)
