"""A hostile agent against its sandbox's model gateway (real containers, a fake provider and a
second "elsewhere" server on a host address, private upstreams allowed as in every gateway test):
it holds the sandbox's gateway token (it is in its environment) and tries to call without it,
to make the gateway call another host, to reach the provider around the gateway, to beat the
budget with a burst of parallel calls, and to find the key; another tenant tries to replay its
recording. Each attack's outcome is written by the agent to attacks.json and asserted here."""
from __future__ import annotations

import json
import os

import pytest
import pytest_asyncio

from tests.support.hosts import docker0_address
from tests.support.provider_server import ProviderServer, Turn
from tests.support.runs import inv, run_spec, upload
from tests.support.sdk_image import sdk_image

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "sk-attacktest-0123456789abcdef0123"
MAX_CALLS = 3

# Every probe prints one JSON object; results end up in /workspace/attacks.json.
AGENT = r'''
import json, os, socket, subprocess, concurrent.futures, urllib.request, urllib.error
gw = os.environ["OPENAI_BASE_URL"]            # http://svc-models:8480/openai
token = os.environ["OPENAI_API_KEY"]
host, port = os.environ["PROVIDER_HOST"], int(os.environ["PROVIDER_PORT"])
elsewhere = os.environ["ELSEWHERE"]           # host:port of a server the gateway must never call
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode()
out = {}

def status(url, headers=None, data=body, method="POST"):
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return type(e).__name__

def raw(request_bytes):
    s = socket.create_connection(("svc-models", 8480), timeout=10)
    s.sendall(request_bytes)
    data = s.recv(200)
    s.close()
    return data.split(b"\r\n", 1)[0].decode("latin-1")

auth = {"Authorization": f"Bearer {token}"}
out["no_token"] = status(f"{gw}/chat/completions")
out["wrong_token"] = status(f"{gw}/chat/completions", {"Authorization": "Bearer sk-guess-0123456789"})
out["anthropic_wrong_key"] = status(gw.replace("/openai", "/anthropic") + "/v1/messages", {"x-api-key": "nope"})
out["dotdot"] = raw(f"POST /openai/../../{elsewhere}/x HTTP/1.1\r\nHost: svc-models\r\nAuthorization: Bearer {token}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
out["double_slash"] = raw(f"POST /openai//{elsewhere}/x HTTP/1.1\r\nHost: svc-models\r\nAuthorization: Bearer {token}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
out["at_sign"] = raw(f"POST /openai@{elsewhere}/x HTTP/1.1\r\nHost: svc-models\r\nAuthorization: Bearer {token}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
out["absolute_uri"] = raw(f"POST http://{elsewhere}/v1/chat/completions HTTP/1.1\r\nHost: {elsewhere}\r\nAuthorization: Bearer {token}\r\nContent-Length: 2\r\n\r\n{{}}".encode())
out["connect"] = raw(f"CONNECT {elsewhere} HTTP/1.1\r\nHost: {elsewhere}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
out["host_header"] = status(f"{gw}/chat/completions", {**auth, "Host": elsewhere})
try:
    socket.create_connection((host, port), timeout=3).close()
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = type(e).__name__
with concurrent.futures.ThreadPoolExecutor(12) as pool:
    out["burst"] = sorted(str(s) for s in pool.map(lambda _: status(f"{gw}/chat/completions", auth), range(12)))
out["gateway_dir"] = os.path.exists("/svc-gateway")
open("/workspace/attacks.json", "w").write(json.dumps(out))
'''

# Written reversed so that the checking process's own command line does not hold the key.
KEY_NOWHERE = ("python3 -c \"import glob, os, sys\nkey = '" + KEY[::-1] + "'[::-1].encode()\n"
               "paths = glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline')\n"
               "for root in ('/workspace', '/etc', '/tmp', '/root'):\n"
               "    paths += [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]\n"
               "def holds(p):\n    try:\n        return key in open(p, 'rb').read()\n    except OSError:\n        return False\n"
               "sys.exit(any(holds(p) for p in paths))\"")


@pytest.fixture(scope="module", autouse=True)
def private_upstreams():
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"
    yield
    os.environ.pop("SERVICE_EGRESS_ALLOW_PRIVATE", None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def attacked(engine_api, docker_client):
    """(run, attacks.json, provider requests, elsewhere requests, the provider's host:port)."""
    host_ip = docker0_address(docker_client)
    image = sdk_image(docker_client)
    with ProviderServer(host="0.0.0.0") as provider, ProviderServer(host="0.0.0.0") as elsewhere:
        provider.respond = lambda request: Turn(text="ok")
        doc = {
            "version": 1, "id": "gw-attacks", "base": image, "task": {"prompt": "attack"},
            "agent": {"type": "cli", "binary": "python3", "args": ["-c", AGENT], "timeout": "90s",
                      "env": {"PROVIDER_HOST": host_ip, "PROVIDER_PORT": str(provider.port),
                              "ELSEWHERE": f"{host_ip}:{elsewhere.port}"}},
            "secrets": {"OPENAI_KEY": "env"},
            "models": {"providers": {"openai": {"key": "OPENAI_KEY", "base_url": f"http://{host_ip}:{provider.port}/v1"}},
                       "budget": {"max_calls": MAX_CALLS}},
            "invariants": {"key_nowhere": inv({"type": "command_exit", "command": KEY_NOWHERE, "expect_exit_code": 0}),
                           # fails on purpose: its evidence shows the file
                           "attacks": inv({"type": "file_content", "path": "attacks.json", "equals": "-"})},
            "resources": {"timeout": "3m"},
        }
        await upload(engine_api, doc)
        run = await run_spec(engine_api, spec_id="gw-attacks", secrets={"OPENAI_KEY": KEY})
        provider_requests, elsewhere_requests = list(provider.requests), list(elsewhere.requests)
    evidence = next(r for r in run["invariant_results"] if r["invariant_id"] == "attacks")["evidence"]
    upstream_host = f"{host_ip}:{provider.port}"
    return run, json.loads(evidence["content"]), provider_requests, elsewhere_requests, upstream_host


async def test_calls_without_the_sandbox_token_are_refused(attacked):
    _, attacks, *_ = attacked
    assert (attacks["no_token"], attacks["wrong_token"], attacks["anthropic_wrong_key"]) == (401, 401, 401), attacks


@pytest.mark.parametrize("trick", ["dotdot", "double_slash", "at_sign", "absolute_uri", "connect"])
async def test_a_request_line_trick_is_refused(attacked, trick):
    _, attacks, *_ = attacked
    code = attacks[trick].split(" ")[1] if attacks[trick].startswith("HTTP/") else attacks[trick]
    assert code[:1] == "4", attacks[trick]


async def test_the_gateway_never_calls_another_host(attacked):
    _, attacks, _, elsewhere, _ = attacked
    assert elsewhere == [], elsewhere


async def test_a_host_header_does_not_move_the_upstream(attacked):
    _, attacks, provider, _, upstream = attacked
    hosts = {r["headers"].get("Host") for r in provider}
    assert hosts == {upstream}, (attacks, hosts)


async def test_the_provider_cannot_be_reached_around_the_gateway(attacked):
    _, attacks, *_ = attacked
    assert attacks["direct"] != "connected", attacks


async def test_a_burst_of_parallel_calls_does_not_beat_the_budget(attacked):
    run, attacks, provider, _, _ = attacked
    assert (len(provider), run["models"]["calls"], attacks["burst"].count("429") >= 12 - MAX_CALLS) == \
        (MAX_CALLS, MAX_CALLS, True), (attacks, len(provider))


async def test_the_key_is_in_no_file_environment_or_command_line_of_the_sandbox(attacked):
    run, attacks, *_ = attacked
    result = next(r for r in run["invariant_results"] if r["invariant_id"] == "key_nowhere")
    assert (result["status"], attacks["gateway_dir"]) == ("passed", False), (result, attacks)


async def test_another_tenant_cannot_replay_the_recording(engine_api, attacked):
    run, *_ = attacked
    response, body = await engine_api.post("/v1/tenants", json={"name": "other"})
    assert response.status == 201, body
    other = body["key"]["secret"]
    text = ("version: 1\nid: stolen\nbase: localhost/svc/python:3.11\ntask: {prompt: x}\nsecrets: {OPENAI_KEY: env}\n"
            "models: {providers: {openai: {key: OPENAI_KEY}}}\ninvariants: {x: {check: {type: file_exists, path: x}}}\n")
    await engine_api.upload_yaml(text, name="stolen", key=other)
    recording = run["reproducer"]["pins"]["model_recording"]
    response, body = await engine_api.post("/v1/runs", key=other, json={"spec_id": "stolen", "pins": {"model_recording": recording}})
    assert (response.status, body.get("error")) == (404, "not_found"), body
