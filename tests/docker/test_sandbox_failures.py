"""Every boot failure cause ends in the error state with its step and a message that says what to
fix, streams `error` then `destroyed`, and leaves no container or network behind."""
from __future__ import annotations

import asyncio

import pytest

from tests.support.engine import assert_released
from tests.support.images import PYTHON
from tests.support.specs import spec
from tests.support.waiting import wait_for
from daemon.appkeys import DEFAULT_TENANT_ID, EVENTS

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def check_failed(api, docker_client, body: dict, step: str, *needles: str) -> dict:
    assert body["state"] == "error" and body["status"] == "failed", body
    assert body["error"]["step"] == step, body["error"]
    for needle in needles:
        assert needle in body["error"]["message"], (needle, body["error"]["message"])
    assert_released(docker_client, body["id"])
    assert not api.manager.workspace_path(body["id"]).exists()
    events = await api.events(body["id"])
    assert events[-2]["data"] == {"state": "error", "step": step, "message": body["error"]["message"]}
    assert events[-1]["data"] == {"state": "destroyed"}
    assert api.manager.runtime(body["id"]) is None  # capacity released
    return body


async def shape_a(api, image: str) -> dict:
    response, body = await api.post("/v1/sandboxes", json={"image": image})
    assert response.status == 201 and body["status"] == "provisioning" and body["id"].startswith("sbx_"), body
    return await api.wait_state(body["id"])


async def test_unqualified_image(api, docker_client):
    body = await shape_a(api, "python:3.11")
    await check_failed(api, docker_client, body, "image", "python:3.11", "fully qualified", "docker.io/library/python:3.11")


async def test_missing_image(api, docker_client):
    body = await shape_a(api, "localhost/svc/does-not-exist:1")
    await check_failed(api, docker_client, body, "image", "localhost/svc/does-not-exist:1", "not on this engine")


async def test_missing_stock_image_suggests_building(api, docker_client):
    body = await api.create_from_spec(spec("bad-service-image", services=[
        {"name": "db", "type": "postgres", "image": "localhost/svc/postgres:99"}]))
    await check_failed(api, docker_client, body, "image", "service 'db' image", "localhost/svc/postgres:99",
                       "build or load it on this engine")


async def test_service_wait_for_timeout_names_the_service(api, docker_client):
    body = await api.create_from_spec(spec("slow-service", services=[
        {"name": "sleepy", "image": PYTHON, "command": ["sleep", "infinity"], "wait_for": {"port": 9999, "timeout": "1s"}}]))
    await check_failed(api, docker_client, body, "services", "service 'sleepy'", "not ready within 1s", "port 9999")


async def test_service_exiting_early(api, docker_client):
    body = await api.create_from_spec(spec("crashy-service", services=[
        {"name": "crashy", "image": PYTHON, "command": ["sh", "-c", "echo boom >&2; exit 3"], "wait_for": {"port": 80, "timeout": "20s"}}]))
    await check_failed(api, docker_client, body, "services", "service 'crashy'", "exited with code 3", "boom")


async def test_healthcheck_failure(api, docker_client):
    body = await api.create_from_spec(spec("unhealthy", services=[
        {"name": "sick", "image": PYTHON, "command": ["sleep", "infinity"],
         "healthcheck": {"command": "echo not yet; exit 1", "interval": "50ms", "retries": 3}}]))
    await check_failed(api, docker_client, body, "services", "service 'sick'", "healthcheck", "3 attempts", "not yet")


async def test_fixture_file_missing_from_the_blob_store(api, docker_client):
    # Fixture files come only from the spec upload (blobs), never from the daemon's host: one whose
    # blob went missing fails the boot at `fixtures`, naming the file.
    spec_id = await api.upload_spec(spec("missing-fixture", fixtures=[{"path": "data/seed.csv"}]),
                                    files={"data/seed.csv": b"id,name\n1,vanishing\n"})
    response, record = await api.get(f"/v1/specs/{spec_id}")
    (digest,) = [f["sha256"] for f in record["files"]]
    (api.home / "blobs" / "sha256" / digest).unlink()
    response, body = await api.post("/v1/sandboxes", json={"spec_id": spec_id})
    assert response.status == 201, body
    await check_failed(api, docker_client, body, "fixtures", "data/seed.csv", "missing from the blob store", "upload the spec again")


async def test_spec_dir_is_gone(api):
    response, body = await api.post("/v1/sandboxes", json={"spec_id": "missing-fixture", "spec_dir": "/etc"})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "spec_dir", body


async def test_fixture_sql_error_includes_the_database_error(api, docker_client):
    body = await api.create_from_spec(spec("bad-sql", services=[{"name": "db", "type": "postgres"}], fixtures=[
        {"service": "db", "sql": "CREATE TABLE ok (id int);"},
        {"service": "db", "sql": "INSERT INTO no_such_table VALUES (1);"}]))
    await check_failed(api, docker_client, body, "fixtures", "fixture 1", "service 'db'",
                       'relation "no_such_table" does not exist')


async def test_missing_secret_names_it(api, docker_client, monkeypatch):
    monkeypatch.delenv("SVC_TEST_NOT_SET", raising=False)
    body = await api.create_from_spec(spec("missing-secret", secrets={"OPENAI_KEY": "env:SVC_TEST_NOT_SET", "OTHER": "env"}),
                                      secrets={"OTHER": "present-value"})
    await check_failed(api, docker_client, body, "secrets", "OPENAI_KEY", "source env", "not sent with the request",
                       "svc CLI")
    assert "present-value" not in str(body)


async def test_sent_values_and_dashboard_secrets(api, docker_client, tmp_path):
    # file: and command: sources are resolved by the client, which sends the values; the daemon
    # takes those and the dashboard store, nothing else.
    response, _ = await api.call("PUT", "/v1/secrets/DASH", json={"value": "from-dashboard"})
    assert response.status == 200
    body = await api.create_from_spec(spec("secret-sources", secrets={
        "FROM_FILE": f"file:{tmp_path / 'token'}", "FROM_CMD": "command:printf from-command", "DASH": "dashboard"}),
        secrets={"FROM_FILE": "from-file", "FROM_CMD": "from-command"})
    assert body["state"] == "ready", body
    out = await api.run(body["id"], 'echo "$FROM_FILE $FROM_CMD $DASH"')
    assert out["stdout"] == "from-file from-command from-dashboard\n"
    events = api.app[EVENTS].history[f"sandbox:{body['id']}"]
    assert events[0]["data"] == {"step": "secrets_resolved", "count": 3}
    await api.delete(f"/v1/sandboxes/{body['id']}")
    missing = await api.create_from_spec(spec("secret-dash-missing", secrets={"NOPE": "dashboard"}))
    await check_failed(api, docker_client, missing, "secrets", "NOPE", "PUT /v1/secrets/NOPE")
    failing = await api.create_from_spec(spec("secret-cmd-unsent", secrets={"BAD": "command:exit 4"}))
    await check_failed(api, docker_client, failing, "secrets", "'BAD' (source command)", "not sent with the request")


async def test_setup_command_failure(api, docker_client):
    body = await api.create_from_spec(spec("bad-setup", secrets={"TOKEN": "env"}, setup={"commands": [
        "echo fine", "echo about to fail; echo \"token=$TOKEN\" >&2; echo broken >&2; exit 7"]}),
        secrets={"TOKEN": "very-secret-token"})
    await check_failed(api, docker_client, body, "setup", "exited with 7", "broken", "setup.commands")
    assert "very-secret-token" not in body["error"]["message"] and "token=***" in body["error"]["message"]


async def test_unmet_required_env(api, docker_client):
    booting = await api.manager.boot(api.app[DEFAULT_TENANT_ID], spec=None, image=PYTHON, shape="B",
                                     required_env=["ANTHROPIC_API_KEY"], secrets={"PRESENT": "yes"})
    await booting.result()
    _, body = await api.get(f"/v1/sandboxes/{booting.id}")
    await check_failed(api, docker_client, body, "required_env", "ANTHROPIC_API_KEY", "secrets")
    booting = await api.manager.boot(api.app[DEFAULT_TENANT_ID], image=PYTHON, shape="B", required_env=["PRESENT"],
                                     secrets={"PRESENT": "yes"})
    ok = await booting.result()
    assert ok.state == "ready", ok
    await api.manager.destroy(ok.sandbox_id)


async def test_delete_during_boot_cancels_it(api, docker_client):
    spec_id = await api.upload_spec(spec("slow-boot", services=[
        {"name": "sleepy", "image": PYTHON, "command": ["sleep", "infinity"], "wait_for": {"port": 9999, "timeout": "60s"}}]))
    create = asyncio.ensure_future(api.post("/v1/sandboxes", json={"spec_id": spec_id}))
    def booting_id():
        live = [sb for sb in api.manager.live if sb.spec_id == spec_id]
        return live[0].id if live and live[0].services else None
    sid = await wait_for(booting_id, what="the sandbox to start its services", interval=0.02)
    response, _ = await api.delete(f"/v1/sandboxes/{sid}")
    assert response.status == 204
    created_response, created = await create
    assert created_response.status == 201 and created["state"] == "stopped", created
    assert_released(docker_client, sid)
    events = await api.events(sid)
    assert events[-1]["data"] == {"state": "destroyed"}


async def test_bad_requests(api):
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON, "spec_id": "x"})
    assert response.status == 400 and "not both" in body["message"]
    response, body = await api.post("/v1/sandboxes", json={})
    assert response.status == 400 and body["error"] == "invalid_request"
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON, "services": ["mysql"]})
    assert response.status == 400 and "mysql" in body["message"]
    response, body = await api.post("/v1/sandboxes", json={"image": PYTHON, "timeout": "soon"})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "timeout"
    response, body = await api.post("/v1/sandboxes", json={"spec_id": "no-such-spec"})
    assert response.status == 404
    response, body = await api.get("/v1/sandboxes/sb-nope")
    assert response.status == 404 and body["details"] == {"resource": "sandbox", "id": "sb-nope"}
    response, body = await api.delete("/v1/sandboxes/sb-nope")
    assert response.status == 404
