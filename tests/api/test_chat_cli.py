"""`svc chat simulate|status` and `svc investigate`: the real CLI (a subprocess) against an
in-process daemon, with local Slack and OpenAI servers."""
from __future__ import annotations

import json

import pytest

from daemon.app import create_app
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, slack_app_settings
from tests.support.openai_server import Reply
from tests.support.procs import svc_cli


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack, llm):
    settings = slack_app_settings(tmp_path / "home", slack, llm)
    return await api_on(aiohttp_client, create_app(settings))


async def test_simulate_prints_each_fixtures_status(api):
    code, out, err = await svc_cli(api, "chat", "simulate", "--signing-secret", SIGNING_SECRET)
    assert (code, [(r["fixture"], r["status"]) for r in json.loads(out)]) == (0, [
        ("url_verification", 200), ("mention", 200), ("retry", 200), ("stale_timestamp", 401), ("bad_signature", 401)]), err


async def test_simulate_with_the_wrong_secret_exits_1(api):
    code, out, err = await svc_cli(api, "chat", "simulate", "--signing-secret", "not-the-secret")
    assert (code, "url_verification" in err) == (1, True)


async def test_status_shows_an_installed_workspace(api, slack):
    from urllib.parse import parse_qs, urlparse

    code, out, err = await svc_cli(api, "chat", "install-url")
    state = parse_qs(urlparse(json.loads(out)["url"]).query)["state"][0]
    slack.grant("code-1", team_id="T0ACME")
    response = await api.client.get("/v1/chat/oauth/callback", params={"code": "code-1", "state": state}, allow_redirects=False)
    assert response.status == 302
    code, out, err = await svc_cli(api, "chat", "status")
    assert (code, [i["team_id"] for i in json.loads(out)["installations"]]) == (0, ["T0ACME"])


async def test_investigate_prints_the_agents_answer(api, llm):
    llm.script(Reply(content="exp-9 failed on invariant wrote."))
    code, out, err = await svc_cli(api, "investigate", "why did exp-9 fail?")
    assert (code, json.loads(out)["answer"]["content"]) == (0, "exp-9 failed on invariant wrote."), err


async def test_investigate_exits_1_when_the_model_fails(api, llm):
    llm.script(Reply(status=500))
    code, out, err = await svc_cli(api, "investigate", "why?")
    assert (code, "investigation model failed" in err) == (1, True)
