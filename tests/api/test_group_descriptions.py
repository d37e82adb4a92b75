"""One description per group: every answer about an experiment or a replica suite (create, list,
cancel, the stream's `done`, GET) is the body its job-engine kind describes, so they never disagree."""
from __future__ import annotations

import pytest

from tests.support.api import Api
from tests.support.experiments import start, upload
from tests.support.specs import spec_yaml
from tests.support.sse import sse_data


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner) -> Api:
    return await start(aiohttp_client, tmp_path / "home", runner)


async def listed(api: Api, experiment_id: str) -> dict:
    response, page = await api.get("/v1/experiments")
    return next(item for item in page["items"] if item["id"] == experiment_id)


async def test_a_new_experiment_is_listed_as_its_create_answer(api):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}], replicas=2))
    response, created = await api.post("/v1/experiments", json={"name": "fresh", "spec_id": "demo"})
    assert await listed(api, created["id"]) == created


async def test_a_cancelled_experiment_is_listed_as_its_cancel_answer(api, runner):
    await upload(api, spec_yaml(matrix=[{"mode": "block"}], replicas=3))
    response, created = await api.post("/v1/experiments", json={"name": "stopped", "spec_id": "demo", "concurrency": 1})
    await api.post(f"/v1/experiments/{created['id']}/run")
    await runner.started.wait()
    response, cancelled = await api.post(f"/v1/experiments/{created['id']}/cancel")
    assert await listed(api, created["id"]) == cancelled


async def test_a_finished_suite_is_streamed_as_get_answers_it(api):
    await upload(api, spec_yaml())
    response, suite = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 3, "inputs": {"mode": "odd"}})
    response = await api.client.get(f"/v1/replicas/{suite['id']}/stream", headers=api.headers())
    done = sse_data(await response.text())[-1]
    response, got = await api.get(f"/v1/replicas/{suite['id']}")
    assert done["suite"] == got
