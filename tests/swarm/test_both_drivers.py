"""The core sandbox behaviour, written once and run by a real daemon on both drivers: the local
engine (`docker`) and the local swarm (`swarm`): files and commands, postgres and redis answering,
no route to this host or to any node, the db audit inside postgres, http_mock behind the egress proxy with a
DNS override, a run's invariants scored, and the scheduler running as many sandboxes at once as
the driver holds (this machine's limit locally; one per CPU of the swarm's nodes)."""
from __future__ import annotations

import http.server
import ipaddress
import os
import threading

import pytest
import pytest_asyncio

from daemon.appkeys import SETTINGS
from daemon.runner.engine import default_global_limit, engine_of
from daemon.sandbox.models import DEFAULT_MEMORY
from daemon.sandbox.network import host_addresses
from tests.support.api import start_api, stop_api
from tests.support.audit import wait_audit
from tests.support.runs import cli_spec, inv, run_spec, statuses
from tests.support.specs import spec
from tests.support.swarm import PYTHON, cluster_resources, daemon_overrides, node_endpoints

pytestmark = pytest.mark.asyncio(loop_scope="module")

DRIVERS = [pytest.param("docker", marks=pytest.mark.docker), "swarm"]

AUDITED = spec(
    "both-drivers-audited",
    services=[
        {"name": "db", "type": "postgres"},
        {"name": "payments", "type": "http_mock", "record": True, "routes": [
            {"method": "GET", "path": "/health", "response": {"status": 200, "body": "ok"}},
            {"method": "POST", "path": "/charges", "response": {"status": 201, "body": {"id": "ch_1"}}},
        ]},
    ],
    fixtures=[{"service": "db", "sql": "CREATE TABLE orders (id int);"}],
    network={"dns_overrides": {"api.stripe.com": "payments"}},
    audit={"db_writes": True, "http_calls": True},
)

# Tries each address:port with a raw socket (no proxy) in parallel; one line per target.
PROBE = """
import socket, sys, threading
def probe(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        print(target, "CONNECTED", flush=True)
    except OSError:
        print(target, "FAILED", flush=True)
threads = [threading.Thread(target=probe, args=(t,)) for t in sys.argv[1:]]
[t.start() for t in threads]
[t.join() for t in threads]
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=DRIVERS)
async def api(request):
    if request.param == "swarm":
        overrides = daemon_overrides(request.getfixturevalue("swarm"))
    else:
        request.getfixturevalue("stock_images")
        overrides = {}
    instance = await start_api(**overrides)
    instance.driver_name = request.param
    yield instance
    await stop_api(instance)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def plain(api):
    _, sandbox = await api.post("/v1/sandboxes", json={"image": PYTHON, "services": ["postgres", "redis"]})
    body = await api.wait_state(sandbox["id"], ("ready", "error", "stopped"), timeout=120)
    assert body["state"] == "ready", body
    yield body["id"]
    await api.delete(f"/v1/sandboxes/{body['id']}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def audited(api):
    body = await api.create_from_spec(AUDITED)
    assert body["state"] == "ready", body
    yield body["id"]
    await api.delete(f"/v1/sandboxes/{body['id']}")


@pytest.fixture(scope="module")
def host_port():
    """A TCP server on every address of this host (what a sandbox must not reach)."""
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


async def test_file_written_through_the_api_is_changed_by_a_command(api, plain):
    response, _ = await api.post(f"/v1/sandboxes/{plain}/files", json={"path": "in.txt", "content": "hello\n"})
    assert response.status == 201
    await api.run(plain, "tr a-z A-Z < in.txt > out.txt")
    response = await api.client.get(f"/v1/sandboxes/{plain}/files/out.txt", headers=api.headers())
    assert await response.read() == b"HELLO\n"


async def test_postgres_and_redis_answer_the_agent(api, plain):
    redis_ping = ("python3 -c \"import os, socket; s = socket.create_connection((os.environ['SERVICE_SERVICE_REDIS_HOST'], "
                  "int(os.environ['SERVICE_SERVICE_REDIS_PORT'])), timeout=5); s.sendall(b'PING\\r\\n'); "
                  "print(s.recv(64).decode().strip())\"")
    out = await api.run(plain, f"psql \"$SERVICE_SERVICE_POSTGRES_URL\" -tAc 'select 41+1' && {redis_ping}")
    assert out["stdout"].split() == ["42", "+PONG"], out


async def test_no_route_to_this_host_or_any_node(api, plain, host_port, request):
    targets = [f"{a}:{host_port}" for a in host_addresses() if ipaddress.ip_address(a).version == 4
               and not ipaddress.ip_address(a).is_loopback]
    if api.driver_name == "swarm":
        targets += node_endpoints(request.getfixturevalue("swarm"))
    out = await api.run(plain, ["python3", "-c", PROBE, *targets], timeout="60s")
    assert sorted(out["stdout"].splitlines()) == sorted(f"{t} FAILED" for t in targets), out


async def test_db_write_is_audited_inside_postgres(api, audited):
    await api.run(audited, 'psql -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL" -c "INSERT INTO orders VALUES (1), (2)"')
    writes = await wait_audit(api, audited, "db_write", lambda d: d.get("table") == "orders")
    assert [(w["details"]["operation"], w["details"]["row_count"]) for w in writes] == [("insert", 2)]


async def test_http_mock_answers_a_dns_override_through_the_egress_proxy(api, audited):
    out = await api.run(audited, "curl -sS -m 10 -w '|%{http_code}' http://api.stripe.com/health")
    assert (out["stdout"], out["stderr"]) == ("ok|200", ""), out


async def test_http_call_through_the_proxy_is_audited(api, audited):
    await api.run(audited, "curl -sS -m 10 -d amount=5 http://payments/charges")
    calls = await wait_audit(api, audited, "http_call", lambda d: d.get("path") == "/charges")
    assert [(c["details"]["service"], c["details"]["status"]) for c in calls] == [("payments", 201)]


async def test_http_mock_records_the_request(api, audited):
    await api.run(audited, "curl -sS -m 10 -d amount=7 'http://payments/charges?n=7'")
    seen = await api.manager.mock_requests(audited, "payments")
    assert [r["body"] for r in seen if r["query"] == {"n": "7"}] == ["amount=7"], seen


async def test_run_invariants_are_scored(api):
    doc = cli_spec("both-drivers-scored", "psql \"$SERVICE_SERVICE_DB_URL\" -tAc 'select count(*) from users' > report.txt",
                   {"counted": inv({"type": "file_content", "path": "report.txt", "regex": "^2$"}),
                    "wrong": inv({"type": "sql", "service": "db", "query": "SELECT count(*) FROM users", "expect_scalar": 5})},
                   services=[{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}],
                   fixtures=[{"service": "db", "sql": "CREATE TABLE users (name text); INSERT INTO users VALUES ('a'), ('b');"}])
    run = await run_spec(api, doc)
    assert statuses(run) == {"counted": "passed", "wrong": "failed"}, run


async def test_an_image_agents_output_is_its_own(api):
    """An image agent is its own container: its stdout and stderr come from the engine it ran on
    (on a swarm, a node's, not the manager's)."""
    doc = cli_spec("both-drivers-image-agent", "", {"ran": inv({"type": "command_exit", "command": "true"})})
    doc["agent"] = {"type": "image", "image": PYTHON, "timeout": "60s",
                    "command": ["sh", "-c", "echo out-$((6*7)); echo err-$((6*7)) >&2"]}
    run = await run_spec(api, doc)
    response = await api.client.get(run["trajectory_url"], headers={"Authorization": f"Bearer {api.key}"})
    agent = (await response.json())["agent"]
    assert (agent["stdout"].strip(), agent["stderr"].strip()) == ("out-42", "err-42"), agent


async def test_scheduler_runs_as_many_sandboxes_as_the_driver_holds(api, request):
    cap = api.app[SETTINGS].max_sandboxes
    if api.driver_name == "swarm" and not os.environ.get("SERVICE_MAX_CONCURRENT_RUNS"):
        cpus, memory = cluster_resources(request.getfixturevalue("swarm"))
        expected = min(cpus, memory // DEFAULT_MEMORY, cap)  # one CPU and 1 GiB per agent
    else:  # this machine's limit (or the one set explicitly)
        expected = default_global_limit(cap)
    assert engine_of(api.app).limit == expected
