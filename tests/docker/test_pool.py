"""The warm sandbox pool against the real engine: once a shape was asked for, the next sandbox of
that shape comes from the pool and works (commands, files, a postgres service with its fixture);
the same spec and seed print the same bytes pooled and cold; nothing crosses from one claim to the
next, and a pooled container holds nothing of a run before its claim; SERVICE_POOL_SIZE=0 boots
cold; the daemon's health body counts hits and misses; shutdown leaves no pooled container."""
from __future__ import annotations

import signal
import sqlite3

import pytest
import pytest_asyncio
import yaml

from tests.support.api import start_api, stop_api
from tests.support.engine import assert_released, labelled
from tests.support.homes import short_dir
from tests.support.procs import SvcdProcess
from tests.support.specs import spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

POOL_FILL_S = 120  # two sandboxes booting in the background on a shared 2-core machine

USERS_SQL = "CREATE TABLE users (id int primary key, name text); INSERT INTO users VALUES (1, 'ada');"


def pg_spec(spec_id: str, **blocks) -> dict:
    return spec(spec_id, services=[{"name": "db", "type": "postgres"}],
                fixtures=[{"service": "db", "sql": USERS_SQL}], agent={"type": "cli", "binary": "sh", "env": {"SHAPE": spec_id}},
                **blocks)


def bare_spec(spec_id: str, **blocks) -> dict:
    return spec(spec_id, agent={"type": "cli", "binary": "sh", "env": {"SHAPE": spec_id}}, **blocks)


@pytest_asyncio.fixture(loop_scope="module")
async def pool_api(stock_images):
    """A daemon with the product's pool (2 per shape), one per test so its counters are its own."""
    instance = await start_api(pool_size=2)
    yield instance
    await stop_api(instance)


async def pool_stats(api) -> dict:
    response, body = await api.get("/v1/health")
    assert response.status == 200, body
    return body["sandbox_pool"]


async def pooled_ready(api, count: int = 1) -> dict:
    """Wait until `count` sandboxes are pooled and ready; the stats then."""
    async def enough():
        stats = await pool_stats(api)
        return stats if sum(stats["pooled"].values()) >= count else None

    return await wait_for(enough, timeout=POOL_FILL_S, what=f"{count} pooled sandbox(es)", interval=0.2)


async def delete(api, docker_client, sandbox_id: str) -> None:
    response, body = await api.delete(f"/v1/sandboxes/{sandbox_id}")
    assert response.status in (200, 202, 204), body
    assert_released(docker_client, sandbox_id)


async def test_the_second_sandbox_of_a_shape_comes_from_the_pool_and_works(pool_api, docker_client):
    doc = pg_spec("pool-pg")
    first = await pool_api.create_from_spec(doc)
    assert first["state"] == "ready" and first["boot"]["pooled"] is False, first
    await pooled_ready(pool_api)
    second = await pool_api.create_from_spec(doc)
    assert second["state"] == "ready" and second["boot"]["pooled"] is True, second
    sid = second["id"]
    response, info = await pool_api.post(f"/v1/sandboxes/{sid}/files", json={"path": "note.txt", "content": "hi"})
    assert response.status == 201, info
    out = await pool_api.run(sid, 'cat note.txt; psql "$SERVICE_SERVICE_DB_URL" -Atc "select name from users"')
    assert (out["exit_code"], out["stdout"]) == (0, "hi" + "ada\n"), out
    await delete(pool_api, docker_client, sid)
    await delete(pool_api, docker_client, first["id"])


async def test_pooled_and_cold_sandboxes_of_one_seed_print_the_same_bytes(pool_api, docker_client):
    program = (
        "import datetime, os, random, socket, time\n"
        "print(time.time(), datetime.datetime.now().isoformat())\n"
        "print([random.random() for _ in range(3)], hash('svc-pool'), list({'a', 'b', 'c', 'd'}))\n"
        "print(os.environ['SERVICE_SEED'], os.environ['PYTHONHASHSEED'], os.environ['SERVICE_SERVICE_DB_PASSWORD'])\n"
        "print(socket.gethostname())\n"
    )
    doc = pg_spec("pool-det", determinism={"clock": "2024-03-01T12:00:00Z", "seed": 1234})

    async def run_once() -> tuple[bool, str]:
        body = await pool_api.create_from_spec(doc)
        assert body["state"] == "ready", body
        response, info = await pool_api.post(f"/v1/sandboxes/{body['id']}/files", json={"path": "det.py", "content": program})
        assert response.status == 201, info
        out = await pool_api.run(body["id"], "python3 det.py")
        assert out["exit_code"] == 0, out
        await delete(pool_api, docker_client, body["id"])
        return body["boot"]["pooled"], out["stdout"]

    cold = await run_once()
    await pooled_ready(pool_api)
    pooled = await run_once()
    assert (cold[0], pooled[0], pooled[1]) == (False, True, cold[1])


async def test_nothing_crosses_from_one_claim_to_the_next(pool_api, docker_client):
    doc = pg_spec("pool-leak", secrets={"API_TOKEN": "dashboard"})
    secret = "pool-secret-6f1d0c2a9e"
    first = await pool_api.create_from_spec(doc, secrets={"API_TOKEN": "first-" + secret})
    assert first["state"] == "ready", first
    await delete(pool_api, docker_client, first["id"])
    await pooled_ready(pool_api, 2)
    # before a claim: no pooled container holds the secret or names a tenant
    containers, _ = labelled(docker_client, daemon=pool_api.manager.daemon_id)
    pooled = [c for c in containers if "svc.pool" in c.labels]
    assert pooled and all(secret not in " ".join(c.attrs["Config"]["Env"]) and "svc.tenant" not in c.labels
                          for c in pooled), [(c.name, c.labels) for c in pooled]

    claimed = await pool_api.create_from_spec(doc, secrets={"API_TOKEN": secret})
    assert claimed["boot"]["pooled"] is True, claimed
    sid = claimed["id"]
    wrote = await pool_api.run(sid, 'echo "$API_TOKEN" > /workspace/left.txt; echo "$API_TOKEN" > /tmp/left.txt; '
                                    'psql "$SERVICE_SERVICE_DB_URL" -qc "insert into users values (2, \'$API_TOKEN\')"')
    assert wrote["exit_code"] == 0, wrote
    await delete(pool_api, docker_client, sid)

    again = await pool_api.create_from_spec(doc, secrets={"API_TOKEN": "other"})
    assert again["boot"]["pooled"] is True, again
    seen = await pool_api.run(again["id"], 'cat /workspace/left.txt /tmp/left.txt 2>/dev/null; echo "$API_TOKEN"; '
                                           'psql "$SERVICE_SERVICE_DB_URL" -Atc "select name from users order by id"')
    assert seen["stdout"] == "other\nada\n", seen
    await delete(pool_api, docker_client, again["id"])


async def test_pool_size_zero_boots_every_sandbox_cold(api, docker_client):
    doc = bare_spec("pool-off")
    bodies = [await api.create_from_spec(doc) for _ in range(2)]
    for body in bodies:
        await delete(api, docker_client, body["id"])
    assert [b["boot"]["pooled"] for b in bodies] == [False, False], bodies


async def test_health_counts_pool_hits_and_misses(pool_api, docker_client):
    doc = bare_spec("pool-count")
    first = await pool_api.create_from_spec(doc)
    await pooled_ready(pool_api)
    second = await pool_api.create_from_spec(doc)
    for body in (first, second):
        await delete(pool_api, docker_client, body["id"])
    stats = await pool_stats(pool_api)
    assert (stats["hits"], stats["misses"]) == (1, 1), stats


async def test_a_shape_left_unused_is_drained(stock_images, docker_client):
    api = await start_api(pool_size=2, pool_idle_s=2)
    try:
        body = await api.create_from_spec(bare_spec("pool-idle"))
        await delete(api, docker_client, body["id"])

        async def refilled():
            return (await pool_stats(api))["refills"] >= 2

        await wait_for(refilled, timeout=POOL_FILL_S, what="2 sandboxes pooled", interval=0.2)

        async def drained():
            containers, _ = labelled(docker_client, daemon=api.manager.daemon_id)
            return not containers

        await wait_for(drained, timeout=60, what="the idle shape's pool drained", interval=0.2)
    finally:
        await stop_api(api)


async def test_no_refill_below_the_free_memory_floor(stock_images, docker_client):
    api = await start_api(pool_size=2, pool_min_free_mb=10**9)  # more than any host has available
    try:
        body = await api.create_from_spec(bare_spec("pool-memory"))
        pooling = api.manager.pool.total()  # a refill would have started with the miss
        await delete(api, docker_client, body["id"])
    finally:
        await stop_api(api)
    assert (body["boot"]["pooled"], pooling) == (False, 0), body


async def test_shutdown_leaves_no_pooled_container(stock_images, docker_client):
    api = await start_api(pool_size=2)
    daemon_id = api.manager.daemon_id
    try:
        body = await api.create_from_spec(bare_spec("pool-shutdown"))
        await delete(api, docker_client, body["id"])
        await pooled_ready(api, 2)
    finally:
        await stop_api(api)
    containers, networks = labelled(docker_client, daemon=daemon_id)
    assert (containers, networks) == ([], []), [c.name for c in containers]


async def test_a_queued_run_finds_its_never_booted_shape_prewarmed(stock_images, docker_client, monkeypatch):
    from tests.support.runs import start_run, wait_run

    monkeypatch.setenv("SERVICE_MAX_CONCURRENT_RUNS", "1")  # the second run waits in the queue
    api = await start_api(pool_size=2)
    try:
        busy = spec("pool-busy", agent={"type": "cli", "binary": "sh", "args": ["-c", "sleep 15"]})
        queued = spec("pool-queued", agent={"type": "cli", "binary": "sh", "args": ["-c", "echo hi > x"]})
        first = await start_run(api, (await api.upload_doc(busy))["id"])
        second = await start_run(api, (await api.upload_doc(queued))["id"])
        await wait_run(api, first["id"], timeout=180)
        run = await wait_run(api, second["id"], timeout=180)
        response, sandbox = await api.get(f"/v1/sandboxes/{run['sandbox_id']}")
        assert response.status == 200, sandbox
        assert sandbox["boot"]["pooled"] is True, sandbox
    finally:
        await stop_api(api)


class PoolingSvcd(SvcdProcess):
    """A real svcd subprocess with the product's pool."""

    def env(self) -> dict[str, str]:
        return {**super().env(), "SERVICE_POOL_SIZE": "2"}


async def test_a_restarted_daemon_reaps_what_a_killed_one_had_pooled(stock_images, docker_client):
    with short_dir() as home:
        svcd = PoolingSvcd(home)
        await svcd.start()
        try:
            status, body = await svcd.request("POST", "/v1/specs", {"name": "pool-kill", "yaml": yaml.safe_dump(bare_spec("pool-kill"))})
            assert status == 201, body
            status, body = await svcd.request("POST", "/v1/sandboxes", {"spec_id": "pool-kill"})
            assert status == 201 and body["state"] == "ready", body

            async def filled():
                status, health = await svcd.request("GET", "/health")  # a key sees the pool's shapes
                return sum(health["sandbox_pool"]["pooled"].values()) >= 2

            await wait_for(filled, timeout=POOL_FILL_S, what="2 pooled sandboxes", interval=0.2)
            svcd.kill(signal.SIGKILL)
            with sqlite3.connect(home / "svc.db") as db:
                daemon_id = db.execute("SELECT value FROM daemon_meta WHERE key = 'daemon_id'").fetchone()[0]
            assert len([c for c in labelled(docker_client, daemon=daemon_id)[0] if "svc.pool" in c.labels]) >= 2
            await svcd.start()
            containers, networks = labelled(docker_client, daemon=daemon_id)
            assert (containers, networks) == ([], []), [c.name for c in containers]
        finally:
            if svcd.proc is not None and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)


async def test_a_shape_whose_pooled_boot_fails_is_not_pooled_again_at_once(pool_api, docker_client):
    doc = pg_spec("pool-broken")
    doc["fixtures"] = [{"service": "db", "sql": "CREATE TABLE broken ("}]
    first = await pool_api.create_from_spec(doc)
    assert (await pool_api.wait_state(first["id"], ("ready", "error"), timeout=120))["state"] == "error"

    async def failed_pooling():
        stats = await pool_stats(pool_api)
        return stats if stats["refill_failures"] >= 2 and not stats["booting"] else None

    before = await wait_for(failed_pooling, timeout=POOL_FILL_S, what="the shape's two pooled boots to fail", interval=0.2)
    assert [0 < wait <= 10.0 for wait in before["retry_in_s"].values()] == [True], before  # 5 s, then 10: two failed
    second = await pool_api.create_from_spec(doc)  # a miss inside the pause: boots cold, pools nothing
    assert (await pool_api.wait_state(second["id"], ("ready", "error"), timeout=120))["state"] == "error"
    after = await pool_stats(pool_api)
    assert (after["misses"], after["refill_failures"], after["booting"]) == (before["misses"] + 1, before["refill_failures"], {}), after
