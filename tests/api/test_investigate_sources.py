"""Answers cite ids: an answer that names none of the ids its tools read gets them listed under it;
one that already cites them is left as the model wrote it."""
from __future__ import annotations

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.openai_server import Reply, tool_call
from tests.support.specs import hello_yaml


@pytest.fixture
async def api(aiohttp_client, tmp_path, llm):
    return await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", llm_base_url=llm.url)))


async def experiment(api) -> str:
    await api.upload_yaml(hello_yaml("spec-nightly"), name="spec-nightly")
    response, body = await api.post("/v1/experiments", json={"spec_id": "spec-nightly", "name": "nightly"})
    assert response.status == 201, body
    return body["id"]


async def answer(api, llm, *replies: Reply) -> str:
    llm.script(*replies)
    _, conversation = await api.post("/v1/conversations", json={})
    response, body = await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": "why?"})
    assert response.status == 201, body
    return body["answer"]["content"]


async def test_an_answer_citing_no_id_lists_the_ids_its_tools_read(api, llm):
    experiment_id = await experiment(api)
    content = await answer(api, llm, Reply(tool_calls=[tool_call("list_experiments", {})]), Reply(content="It never ran."))
    assert content.startswith(f"It never ran.\n\nSources: {experiment_id}")


async def test_an_answer_that_cites_its_ids_is_left_alone(api, llm):
    experiment_id = await experiment(api)
    content = await answer(api, llm, Reply(tool_calls=[tool_call("get_experiment", {"experiment_id": experiment_id})]),
                           Reply(content=f"{experiment_id} never ran."))
    assert content == f"{experiment_id} never ran."
