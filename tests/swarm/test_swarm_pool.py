"""The warm pool on the two-node swarm: once a shape was asked for, the next sandbox of that shape
comes from the pool, on a node, and works (a command, a file, a postgres service with its fixture);
nothing of one claim reaches the next; the host engine runs none of it."""
from __future__ import annotations

import asyncio

import docker
import pytest
import pytest_asyncio

from tests.support.api import start_api, stop_api
from tests.support.specs import spec
from tests.support.swarm import daemon_overrides
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

USERS_SQL = "CREATE TABLE users (id int primary key, name text); INSERT INTO users VALUES (1, 'ada');"


def pg_spec(spec_id: str, **blocks) -> dict:
    return spec(spec_id, services=[{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}],
                fixtures=[{"service": "db", "sql": USERS_SQL}], agent={"type": "cli", "binary": "sh"}, **blocks)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool_api(swarm):
    instance = await start_api(pool_size=1, **daemon_overrides(swarm))
    yield instance
    await stop_api(instance)


async def pooled_ready(api) -> None:
    async def enough():
        response, body = await api.get("/v1/health")
        return sum(body["sandbox_pool"]["pooled"].values()) >= 1

    await wait_for(enough, timeout=180, what="a pooled sandbox on the swarm", interval=0.3)


async def claim(api, doc: dict, **extra) -> dict:
    body = await api.create_from_spec(doc, **extra)
    assert body["state"] == "ready", body
    return body


async def test_the_second_sandbox_of_a_shape_comes_from_the_pool_on_a_node_and_works(pool_api, swarm):
    doc = pg_spec("swarm-pool-pg")
    first = await claim(pool_api, doc)
    await pooled_ready(pool_api)
    second = await claim(pool_api, doc)
    try:
        response, info = await pool_api.post(f"/v1/sandboxes/{second['id']}/files", json={"path": "note.txt", "content": "hi"})
        assert response.status == 201, info
        out = await pool_api.run(second["id"], 'cat note.txt; psql "$SERVICE_SERVICE_DB_URL" -Atc "select name from users"')
        host = docker.from_env()
        try:
            on_host = await asyncio.to_thread(
                host.api.containers, all=True, filters={"label": f"svc.daemon={pool_api.manager.daemon_id}"})
        finally:
            host.close()
        assert (second["boot"]["pooled"], second["node"] in swarm.nodes, out["exit_code"], out["stdout"], on_host) == \
            (True, True, 0, "hiada\n", [])
    finally:
        for body in (first, second):
            await pool_api.delete(f"/v1/sandboxes/{body['id']}")


async def test_nothing_crosses_from_one_claim_to_the_next_on_the_swarm(pool_api):
    doc = pg_spec("swarm-pool-leak", secrets={"API_TOKEN": "dashboard"})
    secret = "swarm-pool-secret-3b9e"
    first = await claim(pool_api, doc, secrets={"API_TOKEN": "first"})
    await pool_api.delete(f"/v1/sandboxes/{first['id']}")
    await pooled_ready(pool_api)
    claimed = await claim(pool_api, doc, secrets={"API_TOKEN": secret})
    assert claimed["boot"]["pooled"] is True, claimed
    wrote = await pool_api.run(claimed["id"], 'echo "$API_TOKEN" > /workspace/left.txt; echo "$API_TOKEN" > /tmp/left.txt; '
                                              'psql "$SERVICE_SERVICE_DB_URL" -qc "insert into users values (2, \'$API_TOKEN\')"')
    assert wrote["exit_code"] == 0, wrote
    await pool_api.delete(f"/v1/sandboxes/{claimed['id']}")
    await pooled_ready(pool_api)
    again = await claim(pool_api, doc, secrets={"API_TOKEN": "other"})
    try:
        seen = await pool_api.run(again["id"], 'cat /workspace/left.txt /tmp/left.txt 2>/dev/null; echo "$API_TOKEN"; '
                                               'psql "$SERVICE_SERVICE_DB_URL" -Atc "select name from users order by id"')
        assert (again["boot"]["pooled"], seen["stdout"]) == (True, "other\nada\n"), seen
    finally:
        await pool_api.delete(f"/v1/sandboxes/{again['id']}")
