"""Side doors of the egress proxy (daemon/sandbox/programs/egress_proxy.py), tried by a real agent in
a real sandbox against servers this test starts on this machine:

* a spec that lists one of the host's own addresses in `network.egress.allow` still cannot reach it
  (only the operator's SERVICE_EGRESS_ALLOW_PRIVATE opens host, link-local and metadata addresses);
* the upstream sees the Host the policy checked, never another one the agent wrote in its header;
* a CONNECT tunnel to an allowed host cannot ask for another server name in its TLS ClientHello."""
from __future__ import annotations

import http.server
import os
import threading
import uuid

import pytest
import pytest_asyncio

from tests.support.images import PYTHON
from tests.support.specs import spec
from tests.support.swarm import bridge_gateway

pytestmark = pytest.mark.asyncio(loop_scope="module")

ECHO_HOST = """
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("host=" + str(self.headers.get("Host"))).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "7")
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def host_server(docker_client):
    """An HTTP server on docker0's address: one of the host's own addresses."""
    server = http.server.ThreadingHTTPServer((bridge_gateway("bridge"), 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[:2]
    server.shutdown()
    server.server_close()


async def test_a_host_address_listed_in_allow_stays_closed(engine_api, host_server):
    address, port = host_server
    body = await engine_api.create_from_spec(spec("egress-host-literal", network={"egress": {"default": "deny",
                                                                                          "allow": [address]}}))
    assert body["state"] == "ready", body
    try:
        out = await engine_api.run(body["id"], f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://{address}:{port}/")
        assert out["stdout"] == "403", out
    finally:
        await engine_api.delete(f"/v1/sandboxes/{body['id']}")


@pytest.fixture(scope="module")
def target(docker_client, stock_images):
    """A server that answers with the Host header it received, on a network of its own."""
    run = uuid.uuid4().hex[:8]
    labels = {"svc.test": "1", "svc.test.run": run}
    net = docker_client.networks.create(f"svc-sidedoor-{run}", driver="bridge", internal=True, labels=labels)
    container = docker_client.containers.run(PYTHON, ["python3", "-c", ECHO_HOST], detach=True, labels=labels,
                                             network=net.name)
    try:
        yield container
    finally:
        container.remove(force=True)
        net.remove()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def allowed_sandbox(engine_api, target, docker_client):
    """A sandbox allowed to reach target.test only; the target joins its outside network."""
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"  # the target's address is private (tests only)
    try:
        body = await engine_api.create_from_spec(spec("egress-side-doors", network={"egress": {
            "default": "deny", "allow": ["target.test"]}}))
    finally:
        del os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"]
    assert body["state"] == "ready", body
    sid = body["id"]
    docker_client.api.connect_container_to_network(target.id, f"svc-{sid}-egress", aliases=["target.test"])
    yield sid
    docker_client.api.disconnect_container_from_network(target.id, f"svc-{sid}-egress", force=True)
    await engine_api.delete(f"/v1/sandboxes/{sid}")


async def test_the_upstream_sees_the_host_the_policy_checked(engine_api, allowed_sandbox):
    out = await engine_api.run(allowed_sandbox, "curl -sS -m 5 -H 'Host: internal-admin.corp' http://target.test:8080/")
    assert out["stdout"] == "host=target.test:8080", out


SNI_PROBE = """
import os, socket, ssl, contextlib
proxy = os.environ["HTTP_PROXY"].split("//")[1].rstrip("/")
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"CONNECT target.test:8080 HTTP/1.1\\r\\nHost: target.test:8080\\r\\n\\r\\n")
assert s.recv(4096).startswith(b"HTTP/1.1 200")
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="forbidden.test")
with contextlib.suppress(ssl.SSLWantReadError):
    tls.do_handshake()
s.sendall(outgoing.read())
print("answer:", s.recv(4096)[:12])
"""


async def test_a_tunnel_cannot_name_another_server_in_its_client_hello(engine_api, allowed_sandbox):
    out = await engine_api.run(allowed_sandbox, ["python3", "-c", SNI_PROBE])
    # refused: the proxy closes the tunnel before the ClientHello reaches the server (which would
    # have answered its garbage with an HTTP 400)
    assert out["stdout"].strip() == "answer: b''", out


async def test_the_proxys_outside_network_is_firewalled_off_from_the_host(engine_api, host_server, docker_client):
    """Behind the proxy's own check, the host firewall: even the proxy container cannot reach the host."""
    address, port = host_server
    body = await engine_api.create_from_spec(spec("egress-outer-firewall", network={"egress": {"default": "deny",
                                                                                             "allow": ["x.test"]}}))
    assert body["state"] == "ready", body
    try:
        proxy = docker_client.containers.list(filters={"label": [f"svc.sandbox={body['id']}", "svc.role=proxy"]})[0]
        probe = f"import socket\ntry:\n    socket.create_connection(('{address}', {port}), timeout=3); print('CONNECTED')\n" \
                "except OSError:\n    print('REFUSED')"
        code, out = proxy.exec_run(["python3", "-c", probe])
        assert out.decode().strip() == "REFUSED", out
    finally:
        await engine_api.delete(f"/v1/sandboxes/{body['id']}")
