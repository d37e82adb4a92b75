"""The node engines of the local swarm are not open: over tcp they answer only a client holding a
certificate the swarm's CA signed (SERVICE_SWARM_CERT_PATH). The rest of tests/swarm shows that
svcd with the certificate works."""
from __future__ import annotations

import ssl
import socket
from pathlib import Path

import docker
import pytest


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("//")[1].rsplit(":", 1)
    return host, int(port)


def test_a_node_refuses_a_client_without_tls(swarm):
    with pytest.raises(docker.errors.DockerException):
        docker.APIClient(base_url=next(iter(swarm.nodes.values())), version="1.41", timeout=5).version()


def test_a_node_refuses_a_tls_client_without_a_certificate(swarm):
    host, port = _host_port(next(iter(swarm.nodes.values())))
    context = ssl.create_default_context(cafile=str(Path(swarm.cert_path) / "ca.pem"))
    context.check_hostname = False
    with socket.create_connection((host, port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        # TLS 1.3: the server checks the client's (missing) certificate after the handshake; the refusal
        # arrives as the answer to the first request.
        tls.sendall(b"GET /version HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n")
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            tls.recv(1024)


def test_a_node_answers_a_client_with_the_certificate(swarm):
    client = swarm.api_client(next(iter(swarm.nodes.values())), timeout=10)
    try:
        assert client.info()["Swarm"]["LocalNodeState"] == "active"
    finally:
        client.close()
