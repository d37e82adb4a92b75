"""The egress/audit proxy program against real containers.

Layout (both networks `internal`: nothing here can leave the machine):

    inner:  agent (no other network), mock (http_mock, alias `mock`), three proxies
    outer:  the three proxies, target (python http.server, aliases `target.test`, `other.test`)

The agent reaches `outer` only through a proxy. Three policies side by side: deny (default),
allow `target.test` (private addresses still refused), allow `target.test` with `allow_private`
(the daemon setting that lets tests reach private addresses)."""
from __future__ import annotations

import json

import pytest

from tests.support.proxyenv import (
    PROGRAMS,
    PY,
    Lab,
    events,
    ip_of,
    sh,
    wait_for,
    wait_port,
)

MOCK_CONFIG = {"port": 80, "record": True, "record_file": "/tmp/requests.jsonl",
               "routes": [{"method": "GET", "path": "/hello", "response": {"status": 200, "body": {"hi": "there"}}},
                          {"method": "POST", "path": "/items", "response": {"status": 201, "body": "created"}}]}
BASE = {"services": ["mock", "sandbox"], "dns_overrides": {"api.example.com": "mock"}, "http_calls": True}


@pytest.fixture(scope="module")
def lab(docker_client, stock_images):
    lab = Lab(docker_client, "svc-egress")
    try:
        inner = lab.network("inner")
        outer = lab.network("outer")
        target = lab.start(PY, ["python3", "-m", "http.server", "8080"], network=outer,
                           aliases=["target.test", "other.test"], working_dir="/etc")
        lab.start(PY, ["python3", "-u", "/svc-programs/http_mock.py"], network=inner, aliases=["mock"],
                  environment={"SVC_MOCK_CONFIG": json.dumps(MOCK_CONFIG)},
                  volumes={str(PROGRAMS): {"bind": "/svc-programs", "mode": "ro"}})
        proxies = {}
        for name, extra in (("deny", {}), ("allow", {"allow": ["target.test"]}),
                            ("allowp", {"allow": ["target.test"], "allow_private": True})):
            _, audit = lab.proxy("egress", {**BASE, **extra}, network=inner, aliases=[f"proxy-{name}"],
                                 extra_networks={outer: []})
            proxies[name] = audit
        agent = lab.start(PY, ["sleep", "infinity"], network=inner, aliases=["sandbox"])
        for host, port in (("mock", 80), ("proxy-deny", 3128), ("proxy-allow", 3128), ("proxy-allowp", 3128)):
            wait_port(agent, host, port)
        lab.agent = agent
        lab.proxies = proxies
        lab.target_ip = ip_of(target, outer)
        lab.target = target
        wait_port(target, "127.0.0.1", 8080)
        yield lab
    finally:
        lab.close()


def curl(lab, proxy: str, url: str, *args: str) -> tuple[int, str]:
    flags = " ".join(args)
    return sh(lab.agent, f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' -x http://proxy-{proxy}:3128 {flags} '{url}'")


def test_deny_blocks_proxy_and_raw_socket_and_names_the_target(lab):
    code, out = curl(lab, "deny", "http://target.test:8080/hostname")
    assert out.strip().endswith("403"), out
    warnings = wait_for(lambda: [e for e in events(lab.proxies["deny"], "warning") if e["details"]["host"] == "target.test"])
    assert warnings, events(lab.proxies["deny"])
    w = warnings[-1]["details"]
    assert (w["port"], w["reason"]) == (8080, "denied_by_policy")
    assert "target.test:8080" in w["message"]
    # The agent has no route to the target at all: a raw socket and a proxy-less curl both fail.
    code, out = sh(lab.agent, "python3 - <<'EOF'\nimport socket\ntry:\n    socket.create_connection(('%s', 8080), timeout=2)\n"
                              "    print('CONNECTED')\nexcept OSError as e:\n    print('FAILED', e)\nEOF" % lab.target_ip)
    assert "FAILED" in out and "CONNECTED" not in out, out
    code, out = sh(lab.agent, f"curl -sS -m 3 --noproxy '*' http://{lab.target_ip}:8080/hostname")
    assert code != 0, out
    # CONNECT (https) is refused the same way.
    code, out = curl(lab, "deny", "https://target.test:8080/")
    assert code != 0 and "403" in out, out


def test_allow_rule_without_private_access_still_refuses_private_addresses(lab):
    code, out = curl(lab, "allow", "http://target.test:8080/hostname")
    assert out.strip().endswith("403"), out
    w = wait_for(lambda: events(lab.proxies["allow"], "warning"))[-1]["details"]
    assert w["host"] == "target.test" and w["port"] == 8080 and w["reason"] == "private_address"
    assert lab.target_ip in w["message"]


def test_allow_rule_with_private_access_reaches_only_the_named_target(lab):
    code, out = curl(lab, "allowp", "http://target.test:8080/hostname")
    assert out.strip() == "200", out
    code, body = sh(lab.agent, "curl -sS -m 5 -x http://proxy-allowp:3128 http://target.test:8080/hostname")
    assert code == 0 and body.strip(), body
    code, out = curl(lab, "allowp", "http://other.test:8080/hostname")  # same machine, another name: denied
    assert out.strip().endswith("403"), out
    # CONNECT tunnels (what HTTPS uses) follow the same rule.
    code, out = curl(lab, "allowp", "http://target.test:8080/hostname", "-p")
    assert out.strip() == "200", out
    code, out = curl(lab, "allowp", "http://other.test:8080/hostname", "-p")
    assert code != 0 and "403" in out, out
    calls = wait_for(lambda: [e["details"] for e in events(lab.proxies["allowp"], "http_call") if e["details"]["status"] == 200
                              and e["details"]["host"] == "target.test"] if len(events(lab.proxies["allowp"], "http_call")) >= 4 else [])
    methods = sorted(c["method"] for c in calls)
    assert methods == ["CONNECT", "GET", "GET"], calls
    assert all(c["service"] is None for c in calls)
    denied = [e["details"] for e in events(lab.proxies["allowp"], "warning")]
    assert {(d["host"], d["port"]) for d in denied} == {("other.test", 8080)}


def test_http_call_to_a_sandbox_service_is_audited_with_redacted_headers(lab):
    code, out = sh(lab.agent, "curl -sS -m 5 -x http://proxy-deny:3128 -H 'Authorization: Bearer sk-test-123' "
                              "-H 'Cookie: session=abc' -H 'X-Api-Key: k-999' -H 'X-Request-Token: t-1' "
                              "-H 'X-Trace: keep-me' http://mock/hello")
    assert code == 0 and '"hi"' in out, out
    code, out = sh(lab.agent, "curl -sS -m 5 -x http://proxy-deny:3128 -d 'a=1&b=2' http://api.example.com/items")
    assert code == 0 and out == "created", out
    calls = wait_for(lambda: [e["details"] for e in events(lab.proxies["deny"], "http_call") if e["details"].get("service")]
                     if len([e for e in events(lab.proxies["deny"], "http_call") if e["details"].get("service")]) >= 2 else [])
    get, post = calls[0], calls[1]
    assert (get["method"], get["host"], get["path"], get["status"], get["service"]) == ("GET", "mock", "/hello", 200, "mock")
    assert get["response_bytes"] == len(b'{"hi": "there"}') and get["request_bytes"] == 0
    assert get["duration_ms"] >= 0
    headers = get["headers"]
    for name in ("Authorization", "Cookie", "X-Api-Key", "X-Request-Token"):
        assert headers[name] == "[redacted]", headers
    assert headers["X-Trace"] == "keep-me"
    raw = lab.proxies["deny"].read_text()
    for secret in ("sk-test-123", "session=abc", "k-999", "t-1\""):
        assert secret not in raw
    assert (post["method"], post["host"], post["path"], post["status"], post["service"]) == (
        "POST", "api.example.com", "/items", 201, "mock")
    assert post["request_bytes"] == 7 and post["response_bytes"] == 7
    # The mock saw the request, through the proxy, with the agent's headers intact.
    code, out = sh(lab.agent, "curl -sS -m 5 -x http://proxy-deny:3128 http://mock/__svc/requests")
    seen = json.loads(out)
    assert any(r["path"] == "/hello" and r["headers"].get("Authorization") == "Bearer sk-test-123" for r in seen), seen


ECHO = r"""
import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if not size:
                    self.rfile.readline(); break
                body += self.rfile.read(size); self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 70000):
            piece = body[i:i + 70000]
            self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
http.server.ThreadingHTTPServer(("0.0.0.0", 9000), H).serve_forever()
"""


def test_keep_alive_chunked_and_large_bodies(lab):
    lab.agent.exec_run(["python3", "-c", ECHO], detach=True)
    wait_port(lab.agent, "127.0.0.1", 9000)
    script = r"""
import http.client, json
c = http.client.HTTPConnection("proxy-deny", 3128, timeout=10)
out = []
for i in range(5):
    c.request("GET", "http://mock/hello")
    r = c.getresponse(); out.append((r.status, len(r.read())))
c.request("POST", "http://sandbox:9000/echo", body=b"x" * 3_000_000)
r = c.getresponse(); out.append((r.status, len(r.read())))
def gen():
    for _ in range(3):
        yield b"chunk-" * 1000
c.request("POST", "http://sandbox:9000/echo", body=gen(), encode_chunked=True)
r = c.getresponse(); out.append((r.status, r.read().count(b"chunk-")))
c.request("GET", "http://mock/hello")
r = c.getresponse(); out.append((r.status, len(r.read())))
print(json.dumps(out))
"""
    code, out = sh(lab.agent, f"python3 - <<'EOF'\n{script}\nEOF")
    assert code == 0, out
    assert json.loads(out) == [[200, 15]] * 5 + [[200, 3_000_000], [200, 3000], [200, 15]]
    posts = [e["details"] for e in events(lab.proxies["deny"], "http_call") if e["details"]["method"] == "POST"
             and e["details"]["host"] == "sandbox"]
    assert [(p["request_bytes"], p["response_bytes"], p["service"]) for p in posts[-2:]] == [
        (3_000_000, 3_000_000, "sandbox"), (18_000, 18_000, "sandbox")]
