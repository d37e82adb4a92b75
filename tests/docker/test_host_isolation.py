"""Sandboxes cannot reach the machine they run on, nor each other (daemon/sandbox/firewall.py).

A real HTTP server started by this test listens on 0.0.0.0 of the host. A sandbox's agent tries it
with raw sockets (no proxy) on docker0's address, on its own network's gateway and on every other
IPv4 address of the host: all refused, while the host itself reaches the same server on each of
those addresses. Through the egress proxy (default: allow) the host address and the metadata
address are refused with a `warning` audit event. Two live sandboxes cannot connect to each
other's containers. The firewall rules go away with the sandbox and with the network of a
sandbox a daemon left behind; with iptables unusable the boot fails at step `network`; with
SERVICE_SANDBOX_FIREWALL=off the host is reachable again (which also shows the probe works).
Every packet stays on this machine: the host's own addresses and its bridges."""
from __future__ import annotations

import asyncio
import fcntl
import http.server
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest
import pytest_asyncio

from daemon.sandbox.firewall import CHAIN
from daemon.sandbox.network import host_addresses
from tests.support.api import start_api, stop_api
from tests.support.audit import wait_audit
from tests.support.engine import assert_released, sandbox_network
from tests.support.homes import short_home
from tests.support.images import PYTHON
from tests.support.specs import spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

BODY = b"svc-host-ok"
PROBE = """
import socket, sys
port = int(sys.argv[1])
for addr in sys.argv[2:]:
    try:
        s = socket.create_connection((addr, port), timeout=2)
        s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        data = b""
        while chunk := s.recv(1000):
            data += chunk
        print(addr, "CONNECTED", data[-20:])
    except OSError as e:
        print(addr, "FAILED", e)
"""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def host_server():
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def interface_ipv4(name: str) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
    return socket.inet_ntoa(packed[20:24])


def reachable_from_host(addr: str, port: int, expect: bytes = BODY) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=2) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(1000):
                data += chunk
            return expect in data
    except OSError:
        return False


def bridge(docker_client, sandbox_id: str) -> str:
    return "br-" + sandbox_network(docker_client, sandbox_id).id[:12]


def gateway(docker_client, network: str) -> str:
    return docker_client.networks.get(network).attrs["IPAM"]["Config"][0]["Gateway"].split("/")[0]


def labelled_network(docker_client, name: str) -> list:
    return docker_client.networks.list(names=[name])


def iptables_rules(sandbox_id: str) -> list[str]:
    """The rules of a sandbox or of a pooled network (named for itself), IPv4 and (where ip6tables
    exists) IPv6."""
    out = ""
    for binary in ("iptables", "ip6tables"):
        if shutil.which(binary):
            out += subprocess.run([binary, "-w", "-S", CHAIN], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"svc-sandbox={sandbox_id} " in line]


async def probe(api, sandbox_id: str, port: int, addrs: list[str]) -> dict[str, str]:
    out = await api.run(sandbox_id, ["python3", "-c", PROBE, str(port), *addrs])
    return {line.split()[0]: line for line in out["stdout"].splitlines() if line.strip()}


async def audit(api, sid: str, pred, timeout: float = 10) -> list[dict]:
    return [e["details"] for e in await wait_audit(api, sid, "warning", pred, timeout=timeout)]


OPEN = spec("host-iso", network={"egress": {"default": "allow"}})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(api):
    body = await api.create_from_spec(OPEN)
    assert body["state"] == "ready", body
    yield body
    await api.delete(f"/v1/sandboxes/{body['id']}")


async def test_agent_cannot_reach_the_host_on_docker0(api, sandbox, host_server):
    docker0 = interface_ipv4("docker0")
    assert reachable_from_host(docker0, host_server)
    result = await probe(api, sandbox["id"], host_server, [docker0])
    assert "FAILED" in result[docker0], result
    out = await api.run(sandbox["id"], f"curl -sS --noproxy '*' -m 2 http://{docker0}:{host_server}/")
    assert out["exit_code"] != 0 and "svc-host-ok" not in out["stdout"], out


async def test_agent_cannot_reach_the_host_on_its_own_network_gateway(api, sandbox, host_server, docker_client):
    gw = gateway(docker_client, sandbox_network(docker_client, sandbox["id"]).name)
    assert reachable_from_host(gw, host_server)
    result = await probe(api, sandbox["id"], host_server, [gw])
    assert "FAILED" in result[gw], result


async def test_agent_cannot_reach_the_host_on_any_other_address(api, sandbox, host_server):
    docker0 = interface_ipv4("docker0")
    candidates = [a for a in host_addresses() if ":" not in a and not a.startswith("127.")]
    # (other sandboxes' bridges come and go meanwhile: probe the ones the host reaches now)
    addrs = [a for a in candidates if reachable_from_host(a, host_server)]
    assert docker0 in addrs and len(addrs) >= 3, (candidates, addrs)  # docker0, this sandbox's bridges, eth0...
    result = await probe(api, sandbox["id"], host_server, addrs)
    assert all("FAILED" in result[a] for a in addrs), result


async def test_proxy_refuses_the_host_address_with_a_warning(api, sandbox, host_server):
    docker0 = interface_ipv4("docker0")
    out = await api.run(sandbox["id"], f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://{docker0}:{host_server}/")
    assert out["stdout"] == "403", out
    warnings = await audit(api, sandbox["id"], lambda d: d.get("host") == docker0)
    assert warnings and warnings[0]["port"] == host_server and warnings[0]["reason"] == "private_address", warnings


async def test_proxy_refuses_the_metadata_address_with_a_warning(api, sandbox):
    out = await api.run(sandbox["id"], "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://169.254.169.254/latest/meta-data/")
    assert out["stdout"] == "403", out
    warnings = await audit(api, sandbox["id"], lambda d: d.get("host") == "169.254.169.254")
    assert warnings and "cloud metadata address" in warnings[0]["message"], warnings


async def test_two_live_sandboxes_cannot_connect_to_each_other(api, sandbox, docker_client):
    other = await api.create_from_spec(spec("host-iso-b"))
    assert other["state"] == "ready", other
    try:
        await api.run(sandbox["id"], "python3 -m http.server 8000 --directory /etc >/dev/null 2>&1", background=True)
        agent = docker_client.containers.get(f"svc-{sandbox['id']}-agent")
        ip = agent.attrs["NetworkSettings"]["Networks"][sandbox_network(docker_client, sandbox["id"]).name]["IPAddress"]
        deadline = time.monotonic() + 15
        while not await asyncio.to_thread(reachable_from_host, ip, 8000, b" 200 "):  # the host opens it: allowed
            assert time.monotonic() < deadline, "the server in sandbox A never answered the host"
            await asyncio.sleep(0.2)
        result = await probe(api, other["id"], 8000, [ip])
        assert "FAILED" in result[ip], result
    finally:
        await api.delete(f"/v1/sandboxes/{other['id']}")


async def test_firewall_rules_stay_with_a_pooled_network_and_go_with_it(docker_client, stock_images):
    """The rules are the network's: a sandbox's network goes back to the pool still firewalled (the
    protection never lapses between two sandboxes), the next sandbox gets it, and a clean stop
    removes the network and its rules."""
    instance = await start_api(pool_size=0)  # no warm sandbox takes the network first
    try:
        body = await instance.create_from_spec(spec("host-iso-c"))
        assert body["state"] == "ready", body
        network = sandbox_network(docker_client, body["id"])
        rules = iptables_rules(network.name)
        assert rules and all(f"-i br-{network.id[:12]} " in r for r in rules), rules
        assert any("! --ctstate RELATED,ESTABLISHED" in r and "-j REJECT" in r for r in rules), rules
        response, _ = await instance.delete(f"/v1/sandboxes/{body['id']}")
        assert response.status == 204
        assert_released(docker_client, body["id"])
        network.reload()
        idle = (network.attrs["Containers"], iptables_rules(network.name) == rules)
        second = await instance.create_from_spec(spec("host-iso-c2"))
        reused = sandbox_network(docker_client, second["id"]).name == network.name
    finally:
        await stop_api(instance)
    assert (idle, reused, iptables_rules(network.name), labelled_network(docker_client, network.name)) == (
        ({}, True), True, [], []), "the pooled network and its rules outlived the daemon"


async def test_rules_of_a_gone_network_are_removed_at_daemon_start(stock_images):
    stale = ["-A", CHAIN, "-i", "br-svcgone0000", "-m", "comment", "--comment",
             "svc-sandbox=sb-gone0000 daemon=dmn_gone00", "-j", "REJECT"]
    subprocess.run(["iptables", "-w", "-N", CHAIN], capture_output=True)
    subprocess.run(["iptables", "-w", *stale], check=True)
    try:
        instance = await start_api()
        await stop_api(instance)
        assert iptables_rules("sb-gone0000") == []
    finally:
        subprocess.run(["iptables", "-w", "-D", *stale[1:]], capture_output=True)


async def test_rules_of_a_killed_daemon_are_removed_when_it_restarts(stock_images, docker_client):
    from tests.support.procs import SvcdProcess as Daemon

    home = short_home("svc-fw-")
    daemon = Daemon(home)
    try:
        await daemon.start()
        status, body = await daemon.request("POST", "/v1/sandboxes", {"image": PYTHON})
        assert status == 201, body
        sid = body["id"]
        async def booted():
            _, body = await daemon.request("GET", f"/v1/sandboxes/{sid}")
            return body if body["state"] != "creating" else None
        body = await wait_for(booted, timeout=30, what="the sandbox to leave creating")
        assert body["state"] == "ready", body
        network = sandbox_network(docker_client, sid).name
        assert iptables_rules(network)
        daemon.kill(signal.SIGKILL)
        assert iptables_rules(network)  # left behind with the containers
        await daemon.start()
        assert iptables_rules(network) == []
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill(signal.SIGTERM)
        shutil.rmtree(home, ignore_errors=True)


async def test_boot_fails_at_network_when_iptables_is_unusable(docker_client, stock_images):
    broken = await start_api(iptables="/nonexistent/iptables")
    try:
        body = await broken.create_from_spec(spec("host-iso-broken"))
        assert body["state"] == "error" and body["error"]["step"] == "network", body
        message = body["error"]["message"]
        assert "/nonexistent/iptables" in message and "SERVICE_SANDBOX_FIREWALL=off" in message, message
        assert_released(docker_client, body["id"])
    finally:
        await stop_api(broken)


async def test_opting_out_lets_the_sandbox_reach_the_host(docker_client, stock_images, host_server):
    unprotected = await start_api(sandbox_firewall=False)
    try:
        body = await unprotected.create_from_spec(spec("host-iso-off"))
        assert body["state"] == "ready", body
        docker0 = interface_ipv4("docker0")
        result = await probe(unprotected, body["id"], host_server, [docker0])
        assert "CONNECTED" in result[docker0] and "svc-host-ok" in result[docker0], result
        assert iptables_rules(body["id"]) == []
    finally:
        await stop_api(unprotected)
