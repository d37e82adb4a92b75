"""Resource ids are namespaced per tenant, specs first: tenant B uploading `foo` creates its own
`foo` and never reads, versions or shadows tenant A's; every spec lookup (specs API, runs, replica
suites, experiments, sandboxes, eval history) takes the caller's tenant; concurrent uploads of one
id by two tenants stay apart; an existing database upgrades to the per-tenant tables."""
from __future__ import annotations

import asyncio
from typing import Any

import aiosqlite
import pytest

from client.config import read_env_file
from daemon.app import create_app
from daemon.runner.request import RunOutcome, ScenarioRequest
from tests.support.api import Api, make_settings
from tests.support.fake_runs import fake_outcome
from tests.support.specs import SPEC_YAML
from tests.support.waiting import wait_for
from daemon.appkeys import DEFAULT_TENANT_ID, RUN_SCENARIO


def tenant_yaml(spec_id: str, who: str, n: int = 1) -> str:
    return SPEC_YAML.replace("id: hello", f"id: {spec_id}\ndescription: tenant {who} upload {n}")


class CapturingRunner:
    """The experiments scheduler's scenario seam: records which spec each run got."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, app, request: ScenarioRequest) -> RunOutcome:
        tenant_id, spec_record, spec = request.tenant_id, request.spec_record, request.spec
        self.calls.append({"tenant_id": tenant_id, "yaml": spec_record["yaml"], "version": spec_record["version"],
                           "description": spec.description})
        return fake_outcome(request, score=1.0, duration_ms=1,
                            invariant_results=[{"invariant_id": "wrote", "name": "wrote", "status": "passed", "score": 1.0}])


@pytest.fixture
def settings(tmp_path):
    # Many requests in a burst (the concurrency test): lift the per-key rate limit.
    return make_settings(tmp_path / "home", rate_limit_per_s=10_000.0, rate_limit_burst=10_000)


@pytest.fixture
def runner() -> CapturingRunner:
    return CapturingRunner()


@pytest.fixture
async def api(aiohttp_client, settings, runner) -> Api:
    app = create_app(settings)
    app[RUN_SCENARIO] = runner
    client = await aiohttp_client(app)
    return Api(client, read_env_file(settings.credentials_path)["SERVICE_API_KEY"])


@pytest.fixture
async def b_key(api) -> str:
    response, body = await api.post("/v1/tenants", json={"name": "tenant-b"})
    assert response.status == 201, body
    return body["key"]["secret"]


async def upload(api: Api, text: str, key: str | None = None) -> dict:
    return await api.upload_yaml(text, name="foo", key=key)


async def test_same_id_in_two_tenants_are_two_specs(api, b_key):
    a1 = await upload(api, tenant_yaml("foo", "A", 1))
    a2 = await upload(api, tenant_yaml("foo", "A", 2))
    b1 = await upload(api, tenant_yaml("foo", "B", 1), key=b_key)
    assert (a1["version"], a2["version"], b1["version"]) == (1, 2, 1)  # B's upload is not A's version 3

    response, a = await api.get("/v1/specs/foo")
    assert a["version"] == 2 and "tenant A upload 2" in a["yaml"]
    response, b = await api.get("/v1/specs/foo", key=b_key)
    assert b["version"] == 1 and b["latest_version"] == 1 and "tenant B upload 1" in b["yaml"]
    response, b_v2 = await api.get("/v1/specs/foo", params={"version": "2"}, key=b_key)
    assert response.status == 404 and "no version 2" in b_v2["message"]  # A's version 2 is not B's

    response, versions = await api.get("/v1/specs/foo/versions")
    assert [v["version"] for v in versions["items"]] == [2, 1] and {v["sha256"] for v in versions["items"]} == {a1["sha256"], a2["sha256"]}
    response, versions = await api.get("/v1/specs/foo/versions", key=b_key)
    assert [(v["version"], v["sha256"]) for v in versions["items"]] == [(1, b1["sha256"])]

    response, listing = await api.get("/v1/specs")
    assert [(s["id"], s["version"]) for s in listing["items"]] == [("foo", 2)] and "tenant A" in listing["items"][0]["yaml"]
    response, listing = await api.get("/v1/specs", key=b_key)
    assert [(s["id"], s["version"]) for s in listing["items"]] == [("foo", 1)] and "tenant B" in listing["items"][0]["yaml"]

    # B deleting its foo leaves A's alone.
    response, _ = await api.delete("/v1/specs/foo", key=b_key)
    assert response.status == 204
    response, a = await api.get("/v1/specs/foo")
    assert response.status == 200 and a["version"] == 2
    response, _ = await api.get("/v1/specs/foo", key=b_key)
    assert response.status == 404


async def test_other_tenants_spec_is_not_found(api, b_key):
    await upload(api, tenant_yaml("only-a", "A"))
    not_found = {"resource": "spec", "id": "only-a"}
    for method, path, kw in (("GET", "/v1/specs/only-a", {}), ("GET", "/v1/specs/only-a", {"params": {"version": "1"}}),
                             ("GET", "/v1/specs/only-a/versions", {}), ("DELETE", "/v1/specs/only-a", {}),
                             ("GET", "/v1/evals/only-a/history", {}),
                             ("POST", "/v1/runs", {"json": {"spec_id": "only-a"}}),
                             ("POST", "/v1/replicas", {"json": {"spec_id": "only-a", "n_replicas": 2}}),
                             ("POST", "/v1/experiments", {"json": {"name": "x", "spec_id": "only-a"}}),
                             ("POST", "/v1/sandboxes", {"json": {"spec_id": "only-a"}})):
        response, body = await api.call(method, path, key=b_key, **kw)
        assert response.status == 404 and body["details"] == not_found, (method, path, body)
    # B "versioning" the id makes B's own version 1; A's spec is untouched.
    mine = await upload(api, tenant_yaml("only-a", "B"), key=b_key)
    assert mine["version"] == 1
    response, a = await api.get("/v1/specs/only-a")
    assert a["version"] == 1 and a["latest_version"] == 1 and "tenant A" in a["yaml"]


async def test_runs_replicas_and_experiments_use_the_callers_spec(api, b_key, runner, monkeypatch):
    await upload(api, tenant_yaml("foo", "A", 1))
    await upload(api, tenant_yaml("foo", "A", 2))
    await upload(api, tenant_yaml("foo", "A", 3))
    await upload(api, tenant_yaml("foo", "B", 1), key=b_key)

    # A single run: the run records B's version and the runner is handed B's spec.
    seen: list[dict] = []
    done = asyncio.Event()

    async def fake_run_scenario(app, request: ScenarioRequest) -> None:
        tenant_id, spec_record = request.tenant_id, request.spec_record
        seen.append({"tenant_id": tenant_id, "yaml": spec_record["yaml"], "version": spec_record["version"]})
        done.set()

    monkeypatch.setattr("daemon.runner.runs.run_scenario", fake_run_scenario)
    response, run = await api.post("/v1/runs", json={"spec_id": "foo"}, key=b_key)
    assert response.status == 202 and run["spec_version"] == 1, run
    await asyncio.wait_for(done.wait(), 10)
    assert seen[0]["version"] == 1 and "tenant B upload 1" in seen[0]["yaml"]
    assert seen[0]["tenant_id"] != api.app[DEFAULT_TENANT_ID]
    response, _ = await api.post("/v1/runs", json={"spec_id": "foo", "spec_version": 3}, key=b_key)
    assert response.status == 404  # A has a version 3 of foo; B does not

    # An experiment and a replica suite of B's foo run B's spec.
    response, exp = await api.post("/v1/experiments", json={"name": "b-exp", "spec_id": "foo"}, key=b_key)
    assert response.status == 201 and exp["spec_version"] == 1, exp
    response, _ = await api.post(f"/v1/experiments/{exp['id']}/run", key=b_key)
    response, suite = await api.post("/v1/replicas", json={"spec_id": "foo", "n_replicas": 2}, key=b_key)
    assert response.status == 202 and suite["spec_version"] == 1, suite
    await wait_for(lambda: len(runner.calls) >= 3, what="tenant B's three runs")
    assert len(runner.calls) == 3
    assert all(c["version"] == 1 and c["description"] == "tenant B upload 1" for c in runner.calls), runner.calls

    # A's experiment of foo runs A's latest, and each tenant's eval history shows only its own.
    response, a_exp = await api.post("/v1/experiments", json={"name": "a-exp", "spec_id": "foo"})
    assert a_exp["spec_version"] == 3
    response, history = await api.get("/v1/evals/foo/history", key=b_key)
    assert [h["experiment_id"] for h in history["items"]] == [exp["id"]]
    response, history = await api.get("/v1/evals/foo/history")
    assert [h["experiment_id"] for h in history["items"]] == [a_exp["id"]]


async def test_concurrent_uploads_of_one_id_by_two_tenants(api, b_key):
    rounds, per_round = 12, 3
    for r in range(rounds):
        uploads = []
        for i in range(per_round):
            n = r * per_round + i
            uploads.append(api.post("/v1/specs", json={"name": "foo", "yaml": tenant_yaml("foo", "A", n)}))
            uploads.append(api.post("/v1/specs", json={"name": "foo", "yaml": tenant_yaml("foo", "B", n)}, key=b_key))
        results = await asyncio.gather(*uploads)
        assert all(response.status == 201 for response, _ in results), [b for _, b in results]
    total = rounds * per_round
    for key, who in ((None, "A"), (b_key, "B")):
        response, versions = await api.get("/v1/specs/foo/versions", key=key)
        assert [v["version"] for v in versions["items"]] == list(range(total, 0, -1))
        bodies = []
        for version in range(1, total + 1):
            response, body = await api.get("/v1/specs/foo", params={"version": str(version)}, key=key)
            assert response.status == 200 and f"tenant {who} upload" in body["yaml"], (who, version, body)
            bodies.append(body["yaml"])
        assert sorted(bodies) == sorted(tenant_yaml("foo", who, n) for n in range(total))  # each upload exactly once


async def test_an_existing_database_upgrades_to_per_tenant_specs(tmp_path):
    """A database written before migration 007 (specs keyed by id alone) keeps its specs, under the
    tenant that owned them, and then lets a second tenant use the same id."""
    from daemon.store.db import Store, _split_sql, migration_files

    path = tmp_path / "svc.db"
    db = await aiosqlite.connect(str(path), isolation_level=None)
    await db.execute("PRAGMA foreign_keys=ON")
    for number, _name, sql in migration_files():
        if number >= 7:
            break
        for statement in _split_sql(sql):
            await db.execute(statement)
    await db.execute("CREATE TABLE schema_migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT)")
    for number, name, _ in migration_files():
        if number < 7:
            await db.execute("INSERT INTO schema_migrations (number, name) VALUES (?, ?)", (number, name))
    now = "2024-01-01T00:00:00Z"
    await db.execute("INSERT INTO tenants (id, name, is_admin, created_at) VALUES ('ten_a', 'a', 1, ?), ('ten_b', 'b', 0, ?)", (now, now))
    await db.execute("INSERT INTO specs (seq, id, tenant_id, name, latest_version, created_at, updated_at)"
                     " VALUES (7, 'foo', 'ten_a', 'foo', 2, ?, ?)", (now, now))
    for version in (1, 2):
        await db.execute("INSERT INTO spec_versions (spec_id, version, name, yaml, sha256, created_at) VALUES ('foo', ?, 'foo', ?, ?, ?)",
                         (version, f"yaml {version}", f"sha{version}", now))
    await db.commit()
    await db.close()

    store = await Store.open(path)
    try:
        from daemon.store import specs as spec_store

        record = await spec_store.get(store, "ten_a", "foo")
        assert record["version"] == 2 and record["yaml"] == "yaml 2" and record["tenant_id"] == "ten_a"
        assert [v["version"] for v in await spec_store.versions(store, "ten_a", "foo")] == [2, 1]
        assert (await store.fetchone("SELECT seq FROM specs WHERE id = 'foo'"))["seq"] == 7
        assert await spec_store.get(store, "ten_b", "foo") is None
        mine = await spec_store.save_version(store, "ten_b", "foo", "foo", "b's yaml")
        assert mine["version"] == 1 and (await spec_store.get(store, "ten_a", "foo"))["version"] == 2
        again = await spec_store.save_version(store, "ten_a", "foo", "foo", "yaml 3",
                                              [{"path": "seed.sql", "digest": "0" * 64, "size": 1, "mode": 0o644}])
        assert again["version"] == 3 and (await spec_store.files(store, "ten_a", "foo", 3))["seed.sql"]["size"] == 1
        await spec_store.delete(store, "ten_a", "foo")  # cascades to versions and files, B's foo stays
        assert await store.fetchall("SELECT 1 FROM spec_versions WHERE tenant_id = 'ten_a'") == []
        assert await store.fetchall("SELECT 1 FROM spec_files") == []
        assert (await spec_store.get(store, "ten_b", "foo"))["yaml"] == "b's yaml"
        fks = await store.fetchall("PRAGMA foreign_key_list(spec_versions)")
        assert {row["table"] for row in fks} == {"specs"}
        assert await store.fetchall("PRAGMA foreign_key_check") == []
    finally:
        await store.close()
