"""Two sandboxes with identically named services never see each other's network, files or secrets;
the same spec and seed give the same sandbox."""
from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from tests.support.images import PYTHON
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")


def twin(name: str) -> dict:
    return spec(
        "twin",
        services=[
            {"name": "db", "type": "postgres"},
            {"name": "api", "type": "http_mock", "routes": [{"path": "/who", "response": {"body": name}}]},
        ],
        secrets={"TWIN_SECRET": "env"},
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pair(api):
    spec_a = await api.upload_spec(twin("a"))
    # A second version of the same spec id: sandbox B boots version 2 (its mock answers "b").
    spec_b = await api.upload_spec(twin("b"))
    assert spec_a == spec_b == "twin"
    (ra, a), (rb, b) = await asyncio.gather(
        api.post("/v1/sandboxes", json={"spec_id": "twin", "spec_version": 1, "seed": "seed_same", "secrets": {"TWIN_SECRET": "alpha-secret"}}),
        api.post("/v1/sandboxes", json={"spec_id": "twin", "spec_version": 2, "seed": "seed_same", "secrets": {"TWIN_SECRET": "beta-secret"}}),
    )
    assert ra.status == rb.status == 201 and a["state"] == b["state"] == "ready", (a, b)
    assert a["spec_version"] == 1 and b["spec_version"] == 2
    return a, b


def container_ip(docker_client, sandbox_id: str, service: str) -> str:
    container = docker_client.containers.get(f"svc-{sandbox_id}-{service}")
    return next(iter(container.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]


async def test_each_sandbox_reaches_its_own_service_by_name(api, pair):
    a, b = pair
    assert (await api.run(a["id"], "curl -s http://api/who"))["stdout"] == "a"
    assert (await api.run(b["id"], "curl -s http://api/who"))["stdout"] == "b"


async def test_other_sandbox_unreachable_by_ip_or_container_name(api, pair, docker_client):
    a, b = pair
    probes = []
    for me, other in ((a, b), (b, a)):
        ip = container_ip(docker_client, other["id"], "api")
        db_ip = container_ip(docker_client, other["id"], "db")
        probes += [
            (me, f"curl -s --max-time 2 http://{ip}/who"),  # with a proxy: refused (a 403 body); without: no route
            (me, f"curl -s --noproxy '*' --max-time 2 http://{ip}/who"),
            (me, f"PGCONNECT_TIMEOUT=2 PGPASSWORD=x psql -h {db_ip} -U postgres -c 'select 1'"),
            (me, f"getent hosts svc-{other['id']}-api"),
        ]
    results = await asyncio.gather(*(api.run(me["id"], command) for me, command in probes))
    for (me, command), out in zip(probes, results):
        if "egress_refused" in out["stdout"]:  # through the sandbox's egress proxy: refused (issue 4)
            assert "/who" in command and "--noproxy" not in command, out
            continue
        assert out["exit_code"] != 0, f"{me['id']}: `{command}` reached the other sandbox: {out}"
        assert "password authentication failed" not in out["stderr"] and out["stdout"] in ("", "\n"), out


async def test_no_route_out_of_the_sandbox(api, pair):
    a, _ = pair
    out = await api.run(a["id"], "curl -s --noproxy '*' --max-time 2 http://1.1.1.1/ || echo unreachable")
    assert out["stdout"].strip().endswith("unreachable"), out
    # the default deny policy: no egress proxy at all, so a plain curl has no route either
    out = await api.run(a["id"], "curl -sf --max-time 2 http://1.1.1.1/ || echo unreachable")
    assert out["stdout"].strip().endswith("unreachable"), out


async def test_files_are_separate(api, pair):
    a, b = pair
    response, _ = await api.post(f"/v1/sandboxes/{a['id']}/files", json={"path": "only-a.txt", "content": "a"})
    assert response.status == 201
    response, body = await api.get(f"/v1/sandboxes/{b['id']}/files/only-a.txt")
    assert response.status == 404
    out = await api.run(b["id"], "ls -A /workspace; find / -name only-a.txt -not -path '/proc/*' 2>/dev/null")
    assert "only-a.txt" not in out["stdout"]
    assert api.manager.workspace_path(a["id"]) != api.manager.workspace_path(b["id"])


async def test_secrets_are_separate(api, pair):
    a, b = pair
    assert (await api.run(a["id"], "echo $TWIN_SECRET"))["stdout"] == "alpha-secret\n"
    assert (await api.run(b["id"], "echo $TWIN_SECRET"))["stdout"] == "beta-secret\n"
    out = await api.run(a["id"], "grep -rs beta-secret /proc/*/environ /workspace || echo clean")
    assert out["stdout"].strip() == "clean"


async def test_same_seed_same_generated_values(api, pair):
    a, b = pair
    env_a = (await api.run(a["id"], "echo $SERVICE_SEED $SERVICE_SERVICE_DB_PASSWORD"))["stdout"]
    env_b = (await api.run(b["id"], "echo $SERVICE_SEED $SERVICE_SERVICE_DB_PASSWORD"))["stdout"]
    assert env_a == env_b and env_a.startswith("seed_same ")
    ok = await api.run(a["id"], 'psql "$SERVICE_SERVICE_DB_URL" -Atc "select 1"')
    assert ok["stdout"] == "1\n", ok


async def test_a_fresh_seed_changes_generated_values(api):
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON, "services": ["postgres"]})
    assert response.status == 201 and body["seed"].startswith("seed_") and body["seed"] != "seed_same"
    ready = await api.wait_state(body["id"])
    assert ready["state"] == "ready", ready
    out = await api.run(body["id"], "echo $SERVICE_SERVICE_POSTGRES_PASSWORD")
    from daemon.sandbox.models import derive

    assert out["stdout"].strip() == derive(body["seed"], "service:postgres:postgres-password")
    assert out["stdout"].strip() != derive("seed_same", "service:postgres:postgres-password")
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_other_tenant_gets_403(api, pair):
    a, _ = pair
    response, body = await api.post("/v1/tenants", json={"name": "intruder"})
    assert response.status == 201, body
    other = body["key"]["secret"]
    for method, path in (("GET", ""), ("GET", "/state"), ("GET", "/files/x"), ("DELETE", ""), ("GET", "/events")):
        response, body = await api.call(method, f"/v1/sandboxes/{a['id']}{path}", key=other)
        assert response.status == 403, (method, path, body)
    response, body = await api.post(f"/v1/sandboxes/{a['id']}/commands", json={"command": "id"}, key=other)
    assert response.status == 403
    response, page = await api.get("/v1/sandboxes", key=other)
    assert page["items"] == []
