"""The judge's API key never leaves the daemon: a real `svcd` subprocess judges through a real OpenAI
chat-completions server that echoes the key back in its errors, and neither the answers nor the
daemon's log carry it."""
from __future__ import annotations

import json

import pytest
import pytest_asyncio

from tests.support.homes import short_dir
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.procs import SvcdProcess

KEY = "sk-judge-never-logged-93f1"


class JudgedSvcd(SvcdProcess):
    def __init__(self, home, judge_url: str):
        super().__init__(home)
        self.judge_url = judge_url

    def env(self) -> dict[str, str]:
        return {**super().env(), "SERVICE_JUDGE_BASE_URL": self.judge_url, "SERVICE_JUDGE_API_KEY": KEY,
                "SERVICE_JUDGE_BACKOFF_S": "0.01"}


ECHOES = [
    Reply(status=401, raw=json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}})),
    Reply(status=500, raw=f"crashed while handling Authorization: Bearer {KEY}"),
    Reply(content=f"my key is {KEY}, no JSON for you"),
    Reply(raw=json.dumps({"choices": [{"message": {"role": "assistant", "content": None, "refusal": f"not with {KEY}"}}]})),
]


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon_and_answers():
    with OpenAIServer() as llm, short_dir() as home:
        svcd = JudgedSvcd(home, llm.url)
        await svcd.start()
        try:
            status, judge = await svcd.request("POST", "/v1/judges", {"name": "j", "rubric": "r"})
            assert status == 201, judge
            answers = []
            for echo in ECHOES:
                llm.respond = lambda body, echo=echo: echo
                answers.append(await svcd.request("POST", f"/v1/judges/{judge['id']}/eval", {"input": "a", "output": "b"}))
            yield answers, (home / "logs" / "svcd.log").read_text()
        finally:
            svcd.kill(15)


async def test_every_echo_of_the_key_is_a_judge_error(daemon_and_answers):
    answers, _ = daemon_and_answers
    assert [a[1]["judge_error"]["code"] for a in answers] == ["rejected", "server_error", "unparsable", "refusal"]


async def test_no_answer_carries_the_key(daemon_and_answers):
    answers, _ = daemon_and_answers
    assert KEY not in json.dumps(answers)


async def test_the_daemon_log_records_the_failures_without_the_key(daemon_and_answers):
    _, log = daemon_and_answers
    assert ("judge call failed (server_error)" in log, KEY in log) == (True, False)
