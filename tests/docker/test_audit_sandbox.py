"""The audit log of a real sandbox booted through the daemon's API with every switch on:
http_calls through the egress proxy (headers redacted, dns_overrides), db_writes audited inside
PostgreSQL (psql: simple protocol; a pipelined stdlib client: extended), file_system writes
and deletes under a watched directory, process spawns with stdout capture, ingress on 127.0.0.1,
and a secret the agent prints that appears in no readable place (audit file, stream, daemon log,
the sandbox body) while the raw capture keeps it for scoring. (The `/commands` response itself
returns the output to the caller, who owns the sandbox.)"""
from __future__ import annotations

import asyncio
import json
import logging
import urllib.request

import pytest
import pytest_asyncio

from daemon.sandbox.redact import RawCapture
from tests.support.audit import audit_events, wait_audit
from tests.support.engine import assert_released, sandbox_network
from tests.support.proxyenv import PGWIRE
from tests.support.specs import spec
from tests.support.waiting import wait_for, wait_for_sync
from daemon.appkeys import EVENTS

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "tok-4f9a1c77e2-never-print-me"

AUDITED = spec(
    "audited",
    services=[
        {"name": "db", "type": "postgres"},
        {"name": "payments", "type": "http_mock", "record": True, "routes": [
            {"method": "GET", "path": "/health", "response": {"status": 200, "body": "ok"}},
            {"method": "POST", "path": "/charges", "response": {"status": 201, "body": {"id": "ch_1"}}},
        ]},
    ],
    fixtures=[{"service": "db", "sql": "CREATE TABLE orders (id int, n int); CREATE TABLE notes (t text);"}],
    secrets={"API_TOKEN": "env"},
    network={"dns_overrides": {"api.stripe.com": "payments"},
             "ingress": {"allow": [{"from": "host", "to_port": 8000}]}},
    audit={"db_writes": True, "http_calls": True, "process_spawns": True, "stdout_capture": True,
           "file_system": {"watch": ["/workspace/out"], "track": ["writes", "deletes"]}},
)


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record) + " " + json.dumps(getattr(record, "__dict__", {}), default=str))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api):
    handler = Collect()
    logging.getLogger().addHandler(handler)
    body = await api.create_from_spec(AUDITED, secrets={"API_TOKEN": SECRET})
    assert body["state"] == "ready", body
    body["_log"] = handler
    yield body
    logging.getLogger().removeHandler(handler)


async def wait_events(api, sandbox_id: str, type_: str, pred=lambda d: True, n: int = 1, timeout: float = 15) -> list[dict]:
    return await wait_audit(api, sandbox_id, type_, pred, n=n, timeout=timeout)


async def test_agent_network_layout(api, sandbox, docker_client):
    sid = sandbox["id"]
    out = await api.run(sid, "env | grep -i -E '^(https?|all|no)_proxy=' | sort; getent hosts db payments svc-proxy")
    assert out["exit_code"] == 0, out
    assert "HTTP_PROXY=http://svc-proxy:3128" in out["stdout"] and "https_proxy=http://svc-proxy:3128" in out["stdout"]
    # http_calls is on: the sandbox's own services go through the proxy too
    assert "payments" not in [line for line in out["stdout"].splitlines() if line.startswith("NO_PROXY")][0]
    network = sandbox_network(docker_client, sid).name
    proxy = docker_client.containers.get(f"svc-{sid}-proxy")
    assert sorted(proxy.attrs["NetworkSettings"]["Networks"]) == sorted([network, f"svc-{sid}-egress"])


async def test_http_calls_are_audited_with_redacted_headers(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, 'curl -sS -m 10 -H "Authorization: Bearer $API_TOKEN" -H "Cookie: sid=$API_TOKEN" '
                             '-H "X-Trace: t1" -d amount=5 http://payments/charges && echo && '
                             'curl -sS -m 10 http://api.stripe.com/health && echo && '
                             'curl -sS -m 10 -o /dev/null -w "%{http_code}" http://example.com/')
    assert out["exit_code"] == 0, out
    lines = out["stdout"].splitlines()
    assert lines[0] == '{"id": "ch_1"}' and lines[1] == "ok" and lines[2] == "403", out
    calls = await wait_events(api, sid, "http_call", n=3)
    by_host = {c["details"]["host"]: c["details"] for c in calls}
    post = by_host["payments"]
    assert (post["method"], post["path"], post["status"], post["service"]) == ("POST", "/charges", 201, "payments")
    assert post["request_bytes"] == 8 and post["response_bytes"] == len('{"id": "ch_1"}')
    assert post["headers"]["Authorization"] == "[redacted]" and post["headers"]["Cookie"] == "[redacted]"
    assert post["headers"]["X-Trace"] == "t1"
    assert by_host["api.stripe.com"]["service"] == "payments" and by_host["api.stripe.com"]["status"] == 200
    assert by_host["example.com"]["status"] == 403 and by_host["example.com"].get("blocked")
    warnings = await wait_events(api, sid, "warning", lambda d: d.get("host") == "example.com")
    assert warnings and warnings[0]["details"]["port"] == 80 and warnings[0]["sandbox_id"] == sid
    # the mock saw the agent's real header: redaction is in the log only
    seen = await api.manager.mock_requests(sid, "payments")
    assert any(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in seen)


async def test_db_writes_simple_and_extended_protocol(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, 'psql -X -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL" '
                             '-c "INSERT INTO orders SELECT g, g FROM generate_series(1, 3) g" '
                             '-c "UPDATE orders SET n = 0 WHERE id <= 2"')
    assert out["exit_code"] == 0 and "INSERT 0 3" in out["stdout"] and "UPDATE 2" in out["stdout"], out
    response, info = await api.post(f"/v1/sandboxes/{sid}/files", json={"path": "pgwire.py", "content": PGWIRE.read_text()})
    assert response.status == 201, info
    batches = [[["INSERT INTO notes SELECT 'n' || g FROM generate_series(1, $1::int) g", [3]],
                ["UPDATE notes SET t = t || '!' WHERE t IN ($1, $2)", ["n1", "n2"]]]]
    out = await api.run(sid, 'python3 pgwire.py "$SERVICE_SERVICE_DB_HOST" "$SERVICE_SERVICE_DB_PORT" '
                             '"$SERVICE_SERVICE_DB_USER" "$SERVICE_SERVICE_DB_PASSWORD" "$SERVICE_SERVICE_DB_DB" '
                             f"<<'EOF'\n{json.dumps(batches)}\nEOF")
    assert out["exit_code"] == 0, out
    assert json.loads(out["stdout"].splitlines()[0])["tags"] == ["INSERT 0 3", "UPDATE 2"]
    writes = await wait_events(api, sid, "db_write", n=4)
    got = [(w["details"]["service"], w["details"]["table"], w["details"]["operation"], w["details"]["row_count"])
           for w in writes]
    assert got == [("db", "orders", "insert", 3), ("db", "orders", "update", 2),
                   ("db", "notes", "insert", 3), ("db", "notes", "update", 2)]
    # fixtures ran before the agent, straight into the server: not audited as agent writes
    assert all(w["details"]["table"] != "orders" or w["details"]["operation"] != "create" for w in writes)


async def test_file_writes_and_deletes_under_the_watched_directory(api, sandbox):
    sid = sandbox["id"]
    # A new directory is watched once the daemon has seen it created (fswatch.py): a file made and
    # removed inside it before that is not reported, so the directory comes first.
    assert (await api.run(sid, "mkdir -p out"))["exit_code"] == 0
    watcher = api.manager.runtime(sid).extension_state["policy"]["watcher"]
    await wait_for(lambda: "out" in watcher.dirs.values(), what="the watcher to see out/")
    out = await api.run(sid, "printf 'hello' > out/report.txt && rm out/report.txt && echo x > elsewhere.txt")
    assert out["exit_code"] == 0, out
    events = await wait_events(api, sid, "file_write", lambda d: d["path"] == "/workspace/out/report.txt", n=2)
    ops = [(e["details"]["operation"], e["details"]["size"]) for e in events]
    assert ops[0] == ("create", 5) or ops[0][0] == "create", ops
    assert ops[-1] == ("delete", None)
    assert not [e for e in audit_events(api, sid, "file_write") if e["details"]["path"].endswith("elsewhere.txt")]


async def test_process_spawn_with_stdout_chunks(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, "python3 -c \"print('a' * 5000)\"")
    assert out["exit_code"] == 0
    spawns = await wait_events(api, sid, "process_spawn", lambda d: "print(" in d["command"])
    details = spawns[-1]["details"]
    assert details["exit_code"] == 0 and details["duration_ms"] >= 0 and details["output_bytes"] == 5001
    assert [len(c) for c in details["stdout_chunks"]] == [4096, 905]


async def test_ingress_reaches_the_agent_on_localhost_only(api, sandbox, docker_client):
    sid = sandbox["id"]
    await api.run(sid, "python3 -m http.server 8000 --directory /workspace >/dev/null 2>&1", background=True)
    ports = next(e["data"]["ports"] for e in api.app[EVENTS].history[f"sandbox:{sid}"]
                 if e["event_type"] == "status" and e["data"].get("step") == "ingress")
    assert len(ports) == 1 and ports[0]["to_port"] == 8000 and ports[0]["host"] == "127.0.0.1", ports
    url = f"http://127.0.0.1:{ports[0]['host_port']}/"

    def status():
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status
        except OSError:
            return None

    def fetch():
        return wait_for_sync(status, timeout=15, what=f"{url} to answer", interval=0.2)

    assert await asyncio.to_thread(fetch) == 200
    proxy = docker_client.containers.get(f"svc-{sid}-proxy")
    bindings = proxy.attrs["HostConfig"]["PortBindings"]
    assert all(b["HostIp"] == "127.0.0.1" for bs in bindings.values() for b in bs), bindings
    agent = docker_client.containers.get(f"svc-{sid}-agent")
    assert not agent.attrs["HostConfig"]["PortBindings"]


async def test_a_printed_secret_appears_in_no_readable_place(api, sandbox):
    sid = sandbox["id"]
    out = await api.run(sid, 'echo "the token is $API_TOKEN"; echo "$API_TOKEN" | base64; echo "oops $API_TOKEN" >&2; exit 3')
    assert out["exit_code"] == 3
    # the command's own response goes to the caller, who owns the sandbox (issue 3's decision)
    assert out["stdout"].startswith(f"the token is {SECRET}")
    spawn = (await wait_events(api, sid, "process_spawn", lambda d: "API_TOKEN" in d["command"]))[-1]
    assert "the token is ***" in spawn["details"]["stdout_chunks"][0]
    # the audit file, the lifecycle stream, the daemon log
    raw_audit = (api.manager.workspace_path(sid) / ".svc" / "audit.jsonl").read_text()
    assert SECRET not in raw_audit
    import base64
    assert base64.b64encode(SECRET.encode()).decode()[:20] not in raw_audit
    stream = json.dumps(api.app[EVENTS].history[f"sandbox:{sid}"])
    assert SECRET not in stream
    assert not [line for line in sandbox["_log"].lines if SECRET in line]
    # ...while scoring can still see what the agent printed
    sb = api.manager.runtime(sid)
    assert SECRET in RawCapture(sb.runtime_dir / "raw").text()
    response, body = await api.get(f"/v1/sandboxes/{sid}")
    assert SECRET not in json.dumps(body)


async def test_destroy_releases_proxies_and_networks(api, sandbox, docker_client):
    sid = sandbox["id"]
    response, _ = await api.delete(f"/v1/sandboxes/{sid}")
    assert response.status == 204
    assert_released(docker_client, sid)
