"""A real daemon with SERVICE_ENGINE=swarm: runs scored end to end, the workspace read through the
API, nothing left on the swarm after a sandbox is destroyed."""
from __future__ import annotations

import pytest

from tests.support.runs import cli_spec, inv, run_spec
from tests.support.specs import spec
from tests.support.swarm import PYTHON
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

USERS = "CREATE TABLE users (id serial PRIMARY KEY, name text); INSERT INTO users (name) VALUES ('a'), ('b'), ('c');"


async def test_run_against_postgres_is_scored_on_the_swarm(api):
    doc = cli_spec("swarm-db", "psql \"$SERVICE_SERVICE_DB_URL\" -tAc 'select count(*) from users' > report.txt",
                   {"counted": inv({"type": "file_content", "path": "report.txt", "regex": "^3$"}),
                    "untouched": inv({"type": "sql", "service": "db", "query": "SELECT count(*) FROM users", "expect_scalar": 3})},
                   services=[{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}],
                   fixtures=[{"service": "db", "sql": USERS}])
    run = await run_spec(api, doc)
    assert run["status"] == "passed", run


async def test_file_written_by_a_command_is_read_through_the_api(api):
    _, sandbox = await api.post("/v1/sandboxes", json={"image": PYTHON})
    await api.wait_state(sandbox["id"], ("ready",))
    await api.run(sandbox["id"], "echo from-the-node > out.txt")
    response = await api.client.get(f"/v1/sandboxes/{sandbox['id']}/files/out.txt", headers=api.headers())
    assert await response.read() == b"from-the-node\n"


async def test_destroyed_sandbox_leaves_nothing_on_the_swarm(api):
    _, sandbox = await api.post("/v1/sandboxes", json={"image": PYTHON})
    await api.wait_state(sandbox["id"], ("ready",))
    await api.delete(f"/v1/sandboxes/{sandbox['id']}")
    driver = api.manager.driver

    async def gone():
        services, networks = await driver.list_labelled({"svc.sandbox": sandbox["id"]})
        return services == [] and networks == []

    assert await wait_for(gone, timeout=40, what="the sandbox's services and overlay removed")


async def test_static_dns_fails_the_boot_naming_what_the_swarm_lacks(api):
    doc = spec("swarm-static-dns", determinism={"seed": 1234, "dns": "static"})
    body = await api.create_from_spec(doc)
    body = await api.wait_state(body["id"], ("ready", "error", "stopped"))
    assert "the swarm driver has no fixed addresses" in (body.get("error") or {}).get("message", ""), body
