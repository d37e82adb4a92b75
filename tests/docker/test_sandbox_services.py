"""One sandbox with postgres + redis + an http_mock, booted once: services reachable by name,
fixtures visible through SQL, the mock's recording, the agent environment, the lifecycle stream,
files, state and diff."""
from __future__ import annotations

import base64
import hashlib

import pytest
import pytest_asyncio

from tests.support.engine import assert_released
from tests.support.specs import spec
from daemon.appkeys import EVENTS

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "s3cr3t-value-do-not-leak"

FULL = spec(
    "full-stack",
    services=[
        {"name": "db", "type": "postgres"},
        {"name": "cache", "type": "redis"},
        {"name": "payments", "type": "http_mock", "record": True, "routes": [
            {"method": "GET", "path": "/health", "response": {"status": 200, "body": "ok"}},
            {"method": "POST", "path": "/charges", "response": {"status": 201, "headers": {"X-Mock": "yes"},
                                                                "body": {"id": "ch_1", "status": "paid"}}},
            {"method": "GET", "path": "/users/*", "response": {"body": {"user": True}}},
        ]},
    ],
    fixtures=[
        {"service": "db", "sql": "CREATE TABLE users (id int primary key, name text);"
                                 " INSERT INTO users VALUES (1, 'ada'), (2, 'grace');"},
        {"service": "db", "sql": "INSERT INTO users VALUES (3, 'edsger');"},
    ],
    secrets={"PAYMENTS_KEY": "env"},
    setup={"commands": ["mkdir -p out && echo booted > out/boot.txt", "echo keep > keep.txt && echo gone > gone.txt"]},
    agent={"type": "cli", "binary": "sh", "env": {"APP_MODE": "test"}},
    audit={"process_spawns": True, "stdout_capture": True},
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api):
    body = await api.create_from_spec(FULL, secrets={"PAYMENTS_KEY": SECRET}, metadata={"suite": "services"})
    assert body["state"] == "ready", body
    return body


async def test_shape_b_body_has_both_vocabularies(sandbox):
    assert sandbox["id"].startswith("sb-")
    assert sandbox["status"] == "ready" and sandbox["state"] == "ready"
    assert sandbox["services"] == ["db", "cache", "payments"]
    assert sandbox["seed"].startswith("seed_")
    assert sandbox["spec_id"] == "full-stack" and sandbox["spec_version"] == 1
    assert sandbox["metadata"] == {"suite": "services"}
    assert sandbox["resources"] == {"cpus": 1.0, "memory": 1024**3, "pids": 512, "disk": 2 * 1024**3, "timeout": 1800.0}
    assert sandbox["secrets"] == ["PAYMENTS_KEY"]
    assert SECRET not in str(sandbox)
    assert sandbox["ready_at"] and sandbox["expires_at"] and sandbox["error"] is None


async def test_postgres_reachable_by_name_and_fixtures_applied(api, sandbox):
    out = await api.run(sandbox["id"], 'psql "$SERVICE_SERVICE_DB_URL" -Atc "select name from users order by id"')
    assert out["exit_code"] == 0, out
    assert out["stdout"].split() == ["ada", "grace", "edsger"]
    direct = await api.run(sandbox["id"], 'PGPASSWORD="$SERVICE_SERVICE_DB_PASSWORD" psql -h db -U postgres -Atc "select 1"')
    assert direct["stdout"].strip() == "1", direct


async def test_redis_reachable_by_name(api, sandbox):
    out = await api.run(sandbox["id"], "redis-cli -h cache PING && redis-cli -h cache SET k v && redis-cli -h cache GET k")
    assert out["exit_code"] == 0, out
    assert out["stdout"].split() == ["PONG", "OK", "v"]


async def test_http_mock_routes_and_recording(api, sandbox):
    out = await api.run(sandbox["id"], "curl -s -i -X POST -H 'Content-Type: application/json' -d '{\"amount\": 5}' "
                                       "'http://payments/charges?currency=eur'")
    assert out["exit_code"] == 0, out
    assert "201" in out["stdout"].splitlines()[0] and "X-Mock: yes" in out["stdout"] and '"ch_1"' in out["stdout"]
    glob = await api.run(sandbox["id"], "curl -s http://payments/users/42")
    assert glob["stdout"] == '{"user": true}'
    missing = await api.run(sandbox["id"], "curl -s -o /dev/null -w '%{http_code}' http://payments/nope")
    assert missing["stdout"] == "404"
    recorded = await api.manager.mock_requests(sandbox["id"], "payments")
    charge = next(r for r in recorded if r["path"] == "/charges")
    assert charge["method"] == "POST" and charge["query"] == {"currency": "eur"}
    assert charge["body"] == '{"amount": 5}' and charge["headers"]["Content-Type"] == "application/json"
    assert charge["ts"].endswith("Z")
    assert [r["path"] for r in recorded] == ["/charges", "/users/42", "/nope"]


async def test_service_exec_runs_inside_the_service(api, sandbox):
    result = await api.manager.service_exec(sandbox["id"], "db", ["psql", "-U", "postgres", "-Atc", "select count(*) from users"])
    assert result.exit_code == 0 and result.stdout.strip() == "3", result


async def test_agent_environment(api, sandbox):
    out = await api.run(sandbox["id"], "env")
    env = dict(line.split("=", 1) for line in out["stdout"].splitlines() if "=" in line)
    assert env["SERVICE_SANDBOX_ID"] == sandbox["id"]
    assert env["SERVICE_SEED"] == sandbox["seed"]
    assert env["SERVICE_SANDBOX_TOKEN"].startswith("svc_sb_")
    assert (env["SERVICE_SERVICE_DB_HOST"], env["SERVICE_SERVICE_DB_PORT"]) == ("db", "5432")
    assert (env["SERVICE_SERVICE_CACHE_HOST"], env["SERVICE_SERVICE_CACHE_PORT"]) == ("cache", "6379")
    assert (env["SERVICE_SERVICE_PAYMENTS_HOST"], env["SERVICE_SERVICE_PAYMENTS_PORT"]) == ("payments", "80")
    assert env["APP_MODE"] == "test"
    assert env["PAYMENTS_KEY"] == SECRET
    assert "SERVICE_API_KEY" not in env
    # The token reads its own sandbox, nothing else.
    response, body = await api.get(f"/v1/sandboxes/{sandbox['id']}", key=env["SERVICE_SANDBOX_TOKEN"])
    assert response.status == 200 and body["id"] == sandbox["id"]
    response, _ = await api.get("/v1/sandboxes", key=env["SERVICE_SANDBOX_TOKEN"])
    assert response.status == 403


async def test_secret_values_stay_out_of_store_and_docker(api, sandbox, docker_client):
    raw = (api.home / "svc.db").read_bytes()
    assert SECRET.encode() not in raw
    for container in docker_client.containers.list(filters={"label": f"svc.sandbox={sandbox['id']}"}):
        assert SECRET not in str(container.attrs["Config"]["Env"])


async def test_setup_commands_ran_and_the_stream_tells_the_boot(api, sandbox):
    boot = await api.client.get(f"/v1/sandboxes/{sandbox['id']}/files/out/boot.txt",
                                headers={"Authorization": f"Bearer {api.key}"})
    assert boot.status == 200 and await boot.read() == b"booted\n"
    # A late subscriber gets the history first: read it through the bus without waiting for the end.
    history = api.app[EVENTS].history[f"sandbox:{sandbox['id']}"]
    status = [e["data"] for e in history if e["event_type"] == "status"]
    steps = [d.get("step") or d.get("state") for d in status]
    assert steps[0] == "secrets_resolved" and status[0]["count"] == 1
    assert "network_created" in steps and {"runtime": "docker", "step": "container_started"} in status
    assert {d["service"] for d in status if d.get("step") == "service_ready"} == {"db", "cache", "payments"}
    assert [d["index"] for d in status if d.get("step") == "fixture_applied"] == [0, 1]
    assert [d["exit_code"] for d in status if d.get("step") == "setup_command"] == [0, 0]
    assert steps.index("fixture_applied") < steps.index("setup_command") < steps.index("ready")
    assert all(SECRET not in str(e) for e in history)


async def test_files_roundtrip_and_path_forms(api, sandbox):
    sid = sandbox["id"]
    response, info = await api.post(f"/v1/sandboxes/{sid}/files", json={"path": "/workspace/notes/a.txt", "content": "hello\n"})
    assert response.status == 201, info
    assert info == {"path": "notes/a.txt", "size": 6, "sha256": hashlib.sha256(b"hello\n").hexdigest()}
    for form in ("notes/a.txt", "workspace/notes/a.txt"):
        response, body = await api.get(f"/v1/sandboxes/{sid}/files/{form}")
        if form.startswith("workspace/"):
            assert response.status == 404  # "workspace/..." is a relative path, not /workspace
        else:
            assert response.status == 200 and body == b"hello\n"
    response, body = await api.get(f"/v1/sandboxes/{sid}/files//workspace/notes/a.txt")
    assert response.status == 200 and body == b"hello\n"
    seen = await api.run(sid, "cat /workspace/notes/a.txt")
    assert seen["stdout"] == "hello\n"
    binary = bytes(range(256))
    response, info = await api.post(f"/v1/sandboxes/{sid}/files",
                                    json={"path": "bin.dat", "content": base64.b64encode(binary).decode(), "encoding": "base64"})
    assert response.status == 201 and info["size"] == 256
    response, body = await api.get(f"/v1/sandboxes/{sid}/files/bin.dat")
    assert body == binary
    response, _ = await api.delete(f"/v1/sandboxes/{sid}/files/bin.dat")
    assert response.status == 204
    response, body = await api.get(f"/v1/sandboxes/{sid}/files/bin.dat")
    assert response.status == 404 and body["error"] == "not_found"
    response, body = await api.delete(f"/v1/sandboxes/{sid}/files/bin.dat")
    assert response.status == 404


@pytest.mark.parametrize("path", ["../etc/passwd", "a/../../x", "/workspace/../etc/passwd", "/etc/passwd", "..", "a/.."])
async def test_path_traversal_refused_on_write(api, sandbox, path):
    response, body = await api.post(f"/v1/sandboxes/{sandbox['id']}/files", json={"path": path, "content": "x"})
    assert response.status == 400 and body["error"] == "invalid_request", body


@pytest.mark.parametrize("raw", ["%2e%2e/%2e%2e/etc/passwd", "a/%2E%2E/%2E%2E/etc/passwd", "..%2f..%2fetc%2fpasswd", "%2Fetc%2Fpasswd"])
async def test_path_traversal_refused_on_read_and_delete(api, sandbox, raw):
    from yarl import URL

    url = URL(f"/v1/sandboxes/{sandbox['id']}/files/{raw}", encoded=True)
    for method in ("GET", "DELETE"):
        response, body = await api.call(method, url)
        assert response.status == 400 and body["error"] == "invalid_request", (method, raw, body)


async def test_symlink_out_of_the_workspace_is_not_followed(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, "ln -sf /etc/passwd link && mkdir -p d && ln -sfn /etc linkdir")
    assert out["exit_code"] == 0, out
    response, body = await api.get(f"/v1/sandboxes/{sid}/files/link")
    assert response.status == 400, body
    response, body = await api.get(f"/v1/sandboxes/{sid}/files/linkdir/passwd")
    assert response.status == 400, body
    response, body = await api.post(f"/v1/sandboxes/{sid}/files", json={"path": "linkdir/evil", "content": "x"})
    assert response.status == 400, body
    response, body = await api.post(f"/v1/sandboxes/{sid}/files", json={"path": "link", "content": "x"})
    assert response.status == 400, body
    await api.run(sid, "rm -f link linkdir")


async def test_state_and_diff(api, sandbox):
    sid = sandbox["id"]
    await api.run(sid, "echo changed > keep.txt; rm gone.txt; echo new > added.txt; chmod 700 added.txt")
    response, state = await api.get(f"/v1/sandboxes/{sid}/state")
    assert response.status == 200
    assert state["sandbox_id"] == sid and state["root"] == "/workspace" and state["taken_at"]
    files = {f["path"]: f for f in state["files"]}
    assert files["added.txt"] == {"path": "added.txt", "size": 4, "sha256": hashlib.sha256(b"new\n").hexdigest(), "mode": "0700"}
    assert "out/boot.txt" in files and not any(p.startswith(".svc") for p in files)
    response, diff = await api.get(f"/v1/sandboxes/{sid}/diff")
    assert response.status == 200
    assert diff["since"]
    assert "added.txt" in [f["path"] for f in diff["added"]]
    assert [f["path"] for f in diff["modified"]] == ["keep.txt"]
    assert diff["deleted"] == [{"path": "gone.txt"}]
    assert not any(f["path"].startswith(".svc") for f in diff["added"])


async def test_command_events_and_process_spawn_audit(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, "echo audited; exit 3")
    assert out["exit_code"] == 3 and out["stdout"] == "audited\n" and out["duration_ms"] >= 0
    history = api.app[EVENTS].history[f"sandbox:{sid}"]
    commands = [e["data"] for e in history if e["event_type"] == "command"]
    assert {"command": "echo audited; exit 3", "exit_code": 3, "duration_ms": out["duration_ms"]} in commands
    audits = [e["data"] for e in history if e["event_type"] == "audit"]
    spawn = next(a for a in audits if a["details"]["command"] == "echo audited; exit 3")
    assert spawn["type"] == "process_spawn" and spawn["sandbox_id"] == sid
    assert spawn["details"]["exit_code"] == 3 and spawn["details"]["stdout"] == "audited\n"
    lines = (api.manager.workspace_path(sid) / ".svc" / "audit.jsonl").read_text().splitlines()
    assert any('"echo audited; exit 3"' in line for line in lines)
    # The secret never reaches the audit log, even when a command prints it.
    leak = await api.run(sid, "echo $PAYMENTS_KEY")
    assert leak["stdout"].strip() == SECRET  # the caller owns the sandbox and sees its output
    text = (api.manager.workspace_path(sid) / ".svc" / "audit.jsonl").read_text()
    assert SECRET not in text and "***" in text


async def test_background_command(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, "sleep 0.3; echo done > bg.txt", background=True)
    assert out["background"] is True and out["exit_code"] is None
    await api.run(sid, "for i in $(seq 50); do [ -f bg.txt ] && break; sleep 0.1; done; cat bg.txt")
    response, body = await api.get(f"/v1/sandboxes/{sid}/files/bg.txt")
    assert body == b"done\n"


async def test_running_after_first_command_and_listing(api, sandbox):
    sid = sandbox["id"]
    response, body = await api.get(f"/v1/sandboxes/{sid}")
    assert body["state"] == "running" and body["status"] == "running"
    response, page = await api.get("/v1/sandboxes")
    assert response.status == 200 and sid in [s["id"] for s in page["items"]]
    response, page = await api.get("/v1/sandboxes", params={"status": "running", "spec_id": "full-stack"})
    assert [s["id"] for s in page["items"]] == [sid]
    response, page = await api.get("/v1/sandboxes", params={"status": "provisioning"})
    assert page["items"] == []
    response, body = await api.get("/v1/sandboxes", params={"status": "bogus"})
    assert response.status == 400


async def test_delete_releases_everything_and_closes_the_stream(api, sandbox, docker_client):
    sid = sandbox["id"]
    response, _ = await api.delete(f"/v1/sandboxes/{sid}")
    assert response.status == 204
    assert_released(docker_client, sid)
    assert not api.manager.workspace_path(sid).exists()
    events = await api.events(sid)
    assert events[-1] == {"event_type": "status", "data": {"state": "destroyed"}}
    response, body = await api.get(f"/v1/sandboxes/{sid}")
    assert body["state"] == "stopped" and body["status"] == "stopped" and body["stopped_at"] and body["stop_reason"] == "deleted"
    response, body = await api.post(f"/v1/sandboxes/{sid}/commands", json={"command": "true"})
    assert response.status == 409 and body["details"] == {"state": "stopped"}
    response, _ = await api.delete(f"/v1/sandboxes/{sid}")
    assert response.status == 204
