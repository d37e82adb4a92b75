"""The egress proxy on a swarm: it alone sits on the sandbox's second (outside) overlay, so the
agent reaches a host the spec allows through it and nothing else. The outside host is a server
this test starts on this machine, on the address the nodes reach it by (the gateway of their
bridge network); the host it does not allow is a second server on docker0's address, another of
this machine's: no traffic leaves the machine."""
from __future__ import annotations

import http.server
import os
import threading

import pytest
import pytest_asyncio

from tests.support.api import start_api, stop_api
from tests.support.specs import spec
from tests.support.swarm import bridge_gateway, daemon_overrides

pytestmark = pytest.mark.asyncio(loop_scope="module")

RAW = ("python3 -c \"import socket; socket.create_connection(('{host}', {port}), timeout=3)\" "
       "&& echo CONNECTED || echo FAILED")


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"outside {self.server.server_address[0]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def outside(swarm):
    """(allowed address, port), (other address, port): servers on two of this machine's addresses."""
    allowed, other = bridge_gateway("svc-swarm"), bridge_gateway("bridge")
    servers = [http.server.ThreadingHTTPServer((address, 0), Answer) for address in (allowed, other)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield tuple(server.server_address[:2] for server in servers)
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(swarm):
    # Both servers listen on this machine's own addresses, which a spec alone can never open
    # (not even as a literal in `allow`): the operator's switch lets the allowed one through.
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    try:
        instance = await start_api(**daemon_overrides(swarm))
        yield instance
        await stop_api(instance)
    finally:
        del os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api, outside):
    (allowed, _), _ = outside
    body = await api.create_from_spec(spec("swarm-egress", network={"egress": {"default": "deny", "allow": [allowed]}}))
    assert body["state"] == "ready", body
    yield body["id"]
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_allowed_outside_host_answers_through_the_proxy(api, sandbox, outside):
    (address, port), _ = outside
    out = await api.run(sandbox, f"curl -sS -m 10 http://{address}:{port}/")
    assert out["stdout"] == f"outside {address}", out


async def test_not_allowed_outside_host_is_refused_by_the_proxy(api, sandbox, outside):
    _, (address, port) = outside
    out = await api.run(sandbox, f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' http://{address}:{port}/")
    assert out["stdout"] == "403", out


async def test_agent_has_no_route_of_its_own_to_the_allowed_host(api, sandbox, outside):
    (address, port), _ = outside
    out = await api.run(sandbox, RAW.format(host=address, port=port), timeout="30s")
    assert out["stdout"].strip() == "FAILED", out
