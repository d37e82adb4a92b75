"""No chat or model secret reaches the daemon's log: a real svcd subprocess goes through the install
flow, signed events, a refused install, a failing Slack and a failing model, and its log file is
searched for every secret value afterwards."""
from __future__ import annotations

import json
import shutil
from urllib.parse import parse_qs, urlparse

import aiohttp
import pytest

from client.config import read_env_file
from tests.support.homes import short_home
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.procs import SvcdProcess
from tests.support.slack_server import SlackServer
from tests.support.slack_signing import app_mention, block_actions, body_of, form_body, signed_headers
from tests.support.waiting import wait_for

SIGNING_SECRET = "signing-secret-3c1f0e9a"
CLIENT_SECRET = "client-secret-8d2b7f41"
SERVER_BOT_TOKEN = "xoxb-server-token-5e6a9c"
LLM_KEY = "sk-llm-key-71bd20c4"
INSTALLED_BOT_TOKEN = "xoxb-installed-token-a4c3d2"


class ChatSvcd(SvcdProcess):
    def __init__(self, home, slack: SlackServer, llm: OpenAIServer):
        super().__init__(home)
        self.slack, self.llm = slack, llm

    def env(self) -> dict[str, str]:
        return {**super().env(), "SERVICE_CHAT_CLIENT_ID": self.slack.client_id, "SERVICE_CHAT_CLIENT_SECRET": CLIENT_SECRET,
                "SERVICE_CHAT_SIGNING_SECRET": SIGNING_SECRET, "SERVICE_CHAT_BOT_TOKEN": SERVER_BOT_TOKEN,
                "SERVICE_CHAT_API_BASE": self.slack.url, "SERVICE_LLM_BASE_URL": self.llm.url, "SERVICE_LLM_API_KEY": LLM_KEY}

    async def raw(self, method: str, path: str, **kw) -> tuple[int, str]:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(self.socket))) as session:
            async with session.request(method, "http://svcd" + path, allow_redirects=False, **kw) as response:
                return response.status, await response.text()


@pytest.fixture
async def svcd():
    home = short_home("svc-chatlog-")
    with SlackServer(client_secret=CLIENT_SECRET) as slack, OpenAIServer() as llm:
        daemon = ChatSvcd(home, slack, llm)
        await daemon.start()
        try:
            yield daemon
        finally:
            daemon.proc.terminate()
            daemon.proc.wait(30)
            shutil.rmtree(home, ignore_errors=True)


async def test_no_secret_value_reaches_the_daemon_log(svcd):
    key = read_env_file(svcd.home / "credentials")["SERVICE_API_KEY"]
    auth = {"Authorization": f"Bearer {key}"}
    status, body = await svcd.raw("GET", "/v1/chat/install-url", headers=auth)
    state = parse_qs(urlparse(json.loads(body)["url"]).query)["state"][0]
    svcd.slack.grant("code-ok", team_id="T0ACME", token=INSTALLED_BOT_TOKEN)
    assert (await svcd.raw("GET", "/v1/chat/oauth/callback", params={"code": "code-ok", "state": state}))[0] == 302
    status, body = await svcd.raw("GET", "/v1/chat/install-url", headers=auth)
    state = parse_qs(urlparse(json.loads(body)["url"]).query)["state"][0]
    await svcd.raw("GET", "/v1/chat/oauth/callback", params={"code": "code-refused", "state": state})
    svcd.llm.script(Reply(status=401), Reply(content="fine"))
    svcd.slack.fail("chat.postMessage", error="invalid_auth")
    for ts in ("1700000100.000100", "1700000200.000100"):
        payload = body_of(app_mention("why did exp-1 fail?", channel="C0INC", ts=ts))
        await svcd.raw("POST", "/v1/chat/events", data=payload, headers=signed_headers(SIGNING_SECRET, payload))
    log_path = svcd.home / "logs" / "svcd.log"
    await wait_for(lambda: svcd.slack.posted and "chat.postMessage failed: invalid_auth" in log_path.read_text(), timeout=30,
                   what="one reply posted and one refused post logged")
    log = log_path.read_text()
    leaked = [name for name, value in (("signing secret", SIGNING_SECRET), ("client secret", CLIENT_SECRET),
                                       ("server bot token", SERVER_BOT_TOKEN), ("installed bot token", INSTALLED_BOT_TOKEN),
                                       ("model key", LLM_KEY)) if value in log]
    assert (leaked, "chat installed: workspace T0ACME" in log) == ([], True)


async def test_no_secret_value_reaches_the_log_or_an_answer_on_the_newer_paths(svcd):
    """A refused workspace takeover, alert button clicks (the server bot's auth.test refused, then a
    workspace nobody installed) and Slack's uninstall event: neither the log nor any answer holds a secret."""
    admin = {"Authorization": f"Bearer {read_env_file(svcd.home / 'credentials')['SERVICE_API_KEY']}"}
    answers = []

    async def install(auth: dict, code: str) -> int:
        status, body = await svcd.raw("GET", "/v1/chat/install-url", headers=auth)
        state = parse_qs(urlparse(json.loads(body)["url"]).query)["state"][0]
        svcd.slack.grant(code, team_id="T0ACME", token=INSTALLED_BOT_TOKEN)
        status, body = await svcd.raw("GET", "/v1/chat/oauth/callback", params={"code": code, "state": state})
        answers.append(body)
        return status

    assert await install(admin, "code-a") == 302
    status, body = await svcd.raw("POST", "/v1/tenants", headers=admin, json={"name": "beta"})
    beta = {"Authorization": f"Bearer {json.loads(body)['key']['secret']}"}
    assert await install(beta, "code-b") == 409
    message = {"channel": "C0ALERTS", "ts": "1700000001.000100", "text": "alert",
               "blocks": [{"type": "actions", "elements": [{"type": "button", "action_id": "svc_debug_context",
                                                            "text": {"type": "plain_text", "text": "Copy"}, "value": "{}"}]}]}
    for team in ("T0ADMIN", "T0NOBODY"):
        form = form_body(block_actions(message, "svc_debug_context", team=team))
        headers = {**signed_headers(SIGNING_SECRET, form), "Content-Type": "application/x-www-form-urlencoded"}
        answers.append((await svcd.raw("POST", "/v1/chat/interactions", data=form, headers=headers))[1])
    uninstall = body_of({"type": "event_callback", "team_id": "T0ACME", "event_id": "EvU1", "event": {"type": "app_uninstalled"}})
    answers.append((await svcd.raw("POST", "/v1/chat/events", data=uninstall, headers=signed_headers(SIGNING_SECRET, uninstall)))[1])
    log_path = svcd.home / "logs" / "svcd.log"
    await wait_for(lambda: "app was uninstalled from workspace T0ACME" in log_path.read_text(), timeout=30, what="the uninstall")
    seen = log_path.read_text() + "".join(answers)
    leaked = [name for name, value in (("signing secret", SIGNING_SECRET), ("client secret", CLIENT_SECRET),
                                       ("server bot token", SERVER_BOT_TOKEN), ("installed bot token", INSTALLED_BOT_TOKEN),
                                       ("model key", LLM_KEY)) if value in seen]
    assert (leaked, "SERVICE_CHAT_BOT_TOKEN: Slack auth.test failed: invalid_auth" in seen) == ([], True)
