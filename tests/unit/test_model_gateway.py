"""The model gateway program (daemon/sandbox/programs/model_gateway.py) as a host subprocess in
front of a fake provider speaking the real wire formats (tests/support/provider_server.py),
driven by the real `openai` and `anthropic` SDKs: each wire format plain and streamed with tool
calls, the record lines, auth, key handling, path and upstream refusals, budgets and replay."""
from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import time
import uuid
from typing import Any, Callable
from urllib.parse import urlsplit

import anthropic
import httpx
import openai
import pytest

from tests.support.model_gateway import GatewayProcess
from tests.support.provider_server import ProviderServer, ToolCall, Turn

OPENAI_KEY = "sk-real-openai-5f2b9c1e7d3a4b6c8e0f"
ANTHROPIC_KEY = "sk-ant-real-8e1d4c7b2a9f3e6d1c0b"
PRICING = {"gpt-4o-mini": [0.15, 0.6, 0.075], "gpt-4o": [2.5, 10.0, 1.25], "claude-haiku-4-5": [1.0, 5.0, 0.1]}
HAIKU = "claude-haiku-4-5-20251001"
OAI_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
RESP_TOOLS = [{"type": "function", "name": "get_weather", "parameters": OAI_TOOLS[0]["function"]["parameters"]}]
ANT_TOOLS = [{"name": "get_weather", "input_schema": OAI_TOOLS[0]["function"]["parameters"]}]


def marker() -> str:
    return "q-" + uuid.uuid4().hex[:12]


def providers(server: ProviderServer) -> dict[str, dict[str, str]]:
    return {"openai": {"base_url": server.openai_url, "key": OPENAI_KEY},
            "anthropic": {"base_url": server.anthropic_url, "key": ANTHROPIC_KEY}}


_clients: dict[tuple[str, int], tuple[openai.OpenAI, anthropic.Anthropic]] = {}


def clients(gw: GatewayProcess, max_retries: int = 0) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    """SDK clients of the gateway, made once per gateway (each builds a TLS context)."""
    key = (gw.url, max_retries)
    if key not in _clients:
        _clients[key] = make_clients(gw, max_retries)
    return _clients[key]


def make_clients(gw: GatewayProcess, max_retries: int) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    return (openai.OpenAI(base_url=gw.openai_url, api_key=gw.token, max_retries=max_retries),
            anthropic.Anthropic(base_url=gw.anthropic_url, api_key=gw.token, max_retries=max_retries))


def wait_for(gw: GatewayProcess, match: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The record lines that match (a line is written once its call completed: waits a moment for one)."""
    deadline = time.monotonic() + 5
    while True:
        found = [r for r in gw.records() if match(r)]
        if found or time.monotonic() > deadline:
            assert found, f"no matching record line in {gw.records()}"
            return found
        time.sleep(0.01)


def record_with(gw: GatewayProcess, text: str) -> dict[str, Any]:
    """The record line of the call whose request mentions `text`."""
    return wait_for(gw, lambda r: text in json.dumps(r.get("request")))[0]


def seen_by(server: ProviderServer, text: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if text in json.dumps(r["body"])]


def raw_request(gw: GatewayProcess, method: str, target: str, headers: dict[str, str] | None = None,
                body: bytes | None = None) -> tuple[int, bytes]:
    parts = urlsplit(gw.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in {"Host": parts.netloc, **(headers or {})}.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def provider():
    with ProviderServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(provider, tmp_path_factory):
    with GatewayProcess(tmp_path_factory.mktemp("gw"), providers(provider), pricing=PRICING,
                        allow_private=True) as gw:
        yield gw


# --- each wire format, plain and streamed, with a tool call ---------------------------------------


def chat_plain(oai: openai.OpenAI, ant: anthropic.Anthropic, q: str) -> list[tuple]:
    r = oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}], tools=OAI_TOOLS)
    return [(t.id, t.function.name, json.loads(t.function.arguments)) for t in r.choices[0].message.tool_calls]


def chat_stream(oai: openai.OpenAI, ant: anthropic.Anthropic, q: str) -> list[tuple]:
    with oai.chat.completions.stream(model="gpt-4o-mini", messages=[{"role": "user", "content": q}], tools=OAI_TOOLS,
                                     stream_options={"include_usage": True}) as stream:
        r = stream.get_final_completion()
    return [(t.id, t.function.name, json.loads(t.function.arguments)) for t in r.choices[0].message.tool_calls]


def responses_plain(oai: openai.OpenAI, ant: anthropic.Anthropic, q: str) -> list[tuple]:
    r = oai.responses.create(model="gpt-4o-mini", input=q, tools=RESP_TOOLS)
    return [(o.call_id, o.name, json.loads(o.arguments)) for o in r.output if o.type == "function_call"]


def responses_stream(oai: openai.OpenAI, ant: anthropic.Anthropic, q: str) -> list[tuple]:
    with oai.responses.stream(model="gpt-4o-mini", input=q, tools=RESP_TOOLS) as stream:
        r = stream.get_final_response()
    return [(o.call_id, o.name, json.loads(o.arguments)) for o in r.output if o.type == "function_call"]


def messages_plain(oai: openai.OpenAI, ant: anthropic.Anthropic, q: str) -> list[tuple]:
    m = ant.messages.create(model=HAIKU, max_tokens=100, messages=[{"role": "user", "content": q}], tools=ANT_TOOLS)
    return [(b.id, b.name, b.input) for b in m.content if b.type == "tool_use"]


def messages_stream(oai: openai.OpenAI, ant: anthropic.Anthropic, q: str) -> list[tuple]:
    with ant.messages.stream(model=HAIKU, max_tokens=100, messages=[{"role": "user", "content": q}],
                             tools=ANT_TOOLS) as stream:
        m = stream.get_final_message()
    return [(b.id, b.name, b.input) for b in m.content if b.type == "tool_use"]


WIRES: dict[str, tuple[Callable[..., list[tuple]], float]] = {  # name -> (call, expected cost in USD)
    # (120 - 20) input, 20 cached, 30 output tokens at the model's prices per 1M tokens
    "chat": (chat_plain, (100 * 0.15 + 20 * 0.075 + 30 * 0.6) / 1e6),
    "chat-stream": (chat_stream, (100 * 0.15 + 20 * 0.075 + 30 * 0.6) / 1e6),
    "responses": (responses_plain, (100 * 0.15 + 20 * 0.075 + 30 * 0.6) / 1e6),
    "responses-stream": (responses_stream, (100 * 0.15 + 20 * 0.075 + 30 * 0.6) / 1e6),
    "messages": (messages_plain, (100 * 1.0 + 20 * 0.1 + 30 * 5.0) / 1e6),
    "messages-stream": (messages_stream, (100 * 1.0 + 20 * 0.1 + 30 * 5.0) / 1e6),
}


@pytest.fixture(scope="module", params=list(WIRES))
def wire_call(request, provider, gateway):
    """One call of a wire format through the gateway: (name, the SDK's tool calls, the record line, marker)."""
    q = marker()
    provider.script(Turn(text="let me look", tool_calls=[ToolCall("get_weather", {"city": q}, id=f"call_{q}")],
                         input_tokens=120, output_tokens=30, cached_tokens=20))
    call, _ = WIRES[request.param]
    tools = call(*clients(gateway), q)
    return request.param, tools, record_with(gateway, q), q


def test_the_sdk_gets_the_tool_call_through_the_gateway(wire_call):
    _, tools, _, q = wire_call
    assert tools == [(f"call_{q}", "get_weather", {"city": q})]


def test_the_record_has_tokens_cost_and_tool_calls(wire_call):
    name, _, rec, q = wire_call
    got = {k: rec[k] for k in ("status", "stream", "usage", "tool_calls")}
    got["tool_calls"] = [{**t, "arguments": json.loads(t["arguments"])} for t in got["tool_calls"]]
    assert got == {"status": 200, "stream": name.endswith("-stream"),
                   "usage": {"input_tokens": 120, "output_tokens": 30, "cached_input_tokens": 20},
                   "tool_calls": [{"id": f"call_{q}", "name": "get_weather", "arguments": {"city": q}}]}
    assert rec["cost_usd"] == pytest.approx(WIRES[name][1])


def test_a_stream_is_recorded_chunk_by_chunk_with_its_first_chunk_time(provider, gateway):
    q = marker()
    provider.script(Turn(text="a b c d e f", pieces=6))
    oai, _ = clients(gateway)
    got = "".join(c.choices[0].delta.content or "" for c in oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": q}], stream=True) if c.choices)
    rec = record_with(gateway, q)
    # role chunk, six content chunks, the finish chunk and [DONE]
    assert (got, len(rec["chunks"]), rec["ttft_ms"] == rec["chunks"][0][0]) == ("a b c d e f", 9, True)


def test_a_stream_that_did_not_ask_for_usage_gets_it_asked_for_and_not_shown(provider, gateway):
    q = marker()
    provider.script(Turn(text="usage asked for", input_tokens=70, output_tokens=9))
    oai, _ = clients(gateway)
    chunks = list(oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}],
                                              stream=True))
    rec = record_with(gateway, q)
    sent = seen_by(provider, q)[0]["body"]
    assert (sent["stream_options"], [c.choices == [] for c in chunks].count(True), rec["usage"],
            rec.get("usage_estimated")) == (
        {"include_usage": True}, 0, {"input_tokens": 70, "output_tokens": 9, "cached_input_tokens": 0}, None)


def test_a_stream_without_usage_is_counted_with_an_estimate(provider, gateway):
    q = marker()
    provider.script(Turn(text="no usage here", usage=False))
    oai, _ = clients(gateway)
    list(oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}], stream=True))
    rec = record_with(gateway, q)
    shown = sum(len(text.encode()) for _, text in rec["chunks"])
    assert (rec["usage"], rec["usage_estimated"], rec["cost_usd"] > 0) == (
        {"input_tokens": -(-rec["request_bytes"] // 4), "output_tokens": -(-shown // 4), "cached_input_tokens": 0},
        True, True)


def test_other_routes_under_a_provider_are_forwarded_and_recorded(provider, gateway):
    oai, _ = clients(gateway)
    q = marker()
    ids = [m.id for m in oai.models.list(extra_query={"q": q})]
    rec = next(r for r in wait_for(gateway, lambda r: q in r["path"]))
    assert (ids, rec["method"], rec["path"], rec["status"]) == (["gpt-4o-mini"], "GET", f"/models?q={q}", 200)


# --- auth and the key ---------------------------------------------------------------------------------


def test_a_wrong_token_gets_an_openai_shaped_401(provider, gateway):
    q = marker()
    oai = openai.OpenAI(base_url=gateway.openai_url, api_key="svc-gw-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as err:
        oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
    assert (err.value.status_code, err.value.code, seen_by(provider, q)) == (401, "invalid_api_key", [])


def test_a_wrong_token_gets_an_anthropic_shaped_401(provider, gateway):
    q = marker()
    ant = anthropic.Anthropic(base_url=gateway.anthropic_url, api_key="svc-gw-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as err:
        ant.messages.create(model=HAIKU, max_tokens=10, messages=[{"role": "user", "content": q}])
    assert (err.value.body["error"]["type"], seen_by(provider, q)) == ("authentication_error", [])


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_provider_gets_the_real_key_and_never_the_token(kind, provider, gateway):
    q = marker()
    oai, ant = clients(gateway)
    if kind == "openai":
        oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
    else:
        ant.messages.create(model=HAIKU, max_tokens=10, messages=[{"role": "user", "content": q}])
    headers = {k.lower(): v for k, v in seen_by(provider, q)[0]["headers"].items()}
    credentials = {k: headers.get(k) for k in ("authorization", "x-api-key")}
    assert credentials == ({"authorization": f"Bearer {OPENAI_KEY}", "x-api-key": None} if kind == "openai"
                           else {"authorization": None, "x-api-key": ANTHROPIC_KEY})


def test_the_provider_gets_its_own_host_whatever_host_the_agent_names(provider, gateway):
    q = marker()
    status, _ = raw_request(gateway, "POST", "/openai/chat/completions",
                            {"Host": "evil.example", "Authorization": f"Bearer {gateway.token}"},
                            json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": q}]}).encode())
    assert (status, seen_by(provider, q)[0]["headers"]["Host"]) == (200, urlsplit(provider.url).netloc)


def echo_calls(provider: ProviderServer, gateway: GatewayProcess) -> tuple[str, str]:
    """A streamed OpenAI call and a plain Anthropic call whose answers echo the credential the provider got
    (returned once both are recorded)."""
    oai, ant = clients(gateway)
    q1, q2 = marker(), marker()
    provider.script(Turn(text="echo", echo_headers=("Authorization",), pieces=1))
    streamed = "".join(c.choices[0].delta.content or "" for c in oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": q1}], stream=True) if c.choices)
    provider.script(Turn(text="echo", echo_headers=("x-api-key",)))
    plain = ant.messages.create(model=HAIKU, max_tokens=10, messages=[{"role": "user", "content": q2}])
    record_with(gateway, q1)
    record_with(gateway, q2)
    return streamed, plain.content[0].text


def test_a_key_echoed_by_the_provider_is_redacted_for_the_agent(provider, gateway):
    assert echo_calls(provider, gateway) == ("echo Authorization=Bearer [REDACTED]", "echo x-api-key=[REDACTED]")


def test_no_record_line_or_log_line_holds_a_key(provider, gateway):
    echo_calls(provider, gateway)
    oai, _ = clients(gateway)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gateway.openai_url, api_key=OPENAI_KEY, max_retries=0).models.list()
    oai.models.list()
    everything = gateway.record_file.read_text() + gateway.log()
    assert [k for k in (OPENAI_KEY, ANTHROPIC_KEY) if k in everything] == []


# --- refusals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method,target", [
    ("GET", "/openai/../x/models"),
    ("GET", "/openai/%2e%2e/x/models"),
    ("GET", "/openai/models/..%2f..%2fx"),
    ("GET", "//evil.example/v1/models"),
    ("GET", "/openai//evil.example/models"),
    ("GET", "/openai/@evil.example/models"),
    ("GET", "/openai/%40evil.example/models"),
    ("GET", "/openai/models\\..\\x"),
    ("GET", "http://evil.example/v1/models"),
    ("CONNECT", "evil.example:443"),
])
def test_a_path_that_could_reach_another_host_is_refused_unforwarded(method, target, provider, gateway):
    before = len(provider.requests)
    status, body = raw_request(gateway, method, target, {"Authorization": f"Bearer {gateway.token}"})
    assert (status in (400, 405), "error" in json.loads(body), len(provider.requests)) == (True, True, before)


def test_a_provider_not_configured_is_refused(gateway):
    status, body = raw_request(gateway, "GET", "/gemini/v1/models", {"Authorization": f"Bearer {gateway.token}"})
    assert (status, json.loads(body)["error"]["code"]) == (404, "provider_not_configured")


def test_health_answers_without_auth(gateway):
    assert raw_request(gateway, "GET", "/__svc/health") == (200, b"ok\n")


def test_a_private_upstream_is_refused_without_allow_private(provider, tmp_path):
    q = marker()
    with GatewayProcess(tmp_path, providers(provider)) as gw:
        oai, _ = clients(gw)
        with pytest.raises(openai.PermissionDeniedError) as err:
            oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
    assert ("127.0.0.1 is a loopback address" in err.value.body["message"], seen_by(provider, q)) == (True, [])


@pytest.fixture(scope="module")
def tls_provider(tmp_path_factory):
    """The fake provider over https with a self-signed certificate for 127.0.0.1 (and that certificate's file)."""
    workdir = tmp_path_factory.mktemp("tls")
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with ProviderServer(ssl_context=context) as server:
        yield server, cert


def test_an_https_upstream_with_an_untrusted_certificate_is_not_called(tls_provider, tmp_path):
    server, _ = tls_provider
    q = marker()
    with GatewayProcess(tmp_path, providers(server), allow_private=True) as gw:
        oai, _ = clients(gw)
        with pytest.raises(openai.InternalServerError) as err:
            oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
    assert (err.value.status_code, "CERTIFICATE_VERIFY_FAILED" in err.value.body["message"], seen_by(server, q)) == (
        502, True, [])


def test_an_https_upstream_with_a_trusted_certificate_is_called(tls_provider, tmp_path):
    server, cert = tls_provider
    server.script(Turn(text="over tls"))
    with GatewayProcess(tmp_path, providers(server), allow_private=True, env={"SSL_CERT_FILE": str(cert)}) as gw:
        oai, _ = clients(gw)
        r = oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": marker()}])
    assert r.choices[0].message.content == "over tls"


def test_an_upstream_error_is_passed_on_and_recorded(provider, gateway):
    q = marker()
    provider.script(Turn(status=500, error="the model fell over"))
    oai, _ = clients(gateway)
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
    rec = record_with(gateway, q)
    assert (rec["status"], rec["error"]) == (500, {"type": "server_error", "message": "the model fell over"})


# --- budgets --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def max_calls_run(provider, tmp_path_factory):
    """Three calls against max_calls 2, by a client that retries (as agents' clients do)."""
    q = marker()
    with GatewayProcess(tmp_path_factory.mktemp("budget-calls"), providers(provider), pricing=PRICING,
                        allow_private=True, budget={"max_calls": 2}) as gw:
        oai, _ = clients(gw, max_retries=2)
        for _ in range(2):
            oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
        with pytest.raises(openai.RateLimitError) as err:
            oai.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": q}])
        gw.record(3)  # written once the refusal was sent
        yield err.value, gw.records(), seen_by(provider, q)


def test_the_call_past_max_calls_gets_a_429_naming_the_limit(max_calls_run):
    err, _, _ = max_calls_run
    assert (err.status_code, err.code, err.body["message"]) == (
        429, "budget_exceeded", "svc budget exceeded: max_calls 2 reached (2 calls made)")


def test_the_call_past_max_calls_never_reaches_the_provider(max_calls_run):
    _, _, seen = max_calls_run
    assert len(seen) == 2


def test_the_call_past_max_calls_has_one_refused_record_line(max_calls_run):
    _, records, _ = max_calls_run
    refused = [(r["seq"], r["status"], r["refused"]) for r in records if r["refused"]]
    assert refused == [(3, 429, {"reason": "budget_exceeded", "limit": "max_calls", "value": 2,
                                 "spent": {"calls": 2, "tokens": 30, "cost_usd": 0.0000090}})]


@pytest.fixture(scope="module")
def max_cost_run(provider, tmp_path_factory):
    """Anthropic calls of $0.006 each against max_cost_usd 0.01: the third is refused."""
    q = marker()
    with GatewayProcess(tmp_path_factory.mktemp("budget-cost"), providers(provider), pricing=PRICING,
                        allow_private=True, budget={"max_cost_usd": 0.01}) as gw:
        _, ant = clients(gw)
        provider.script(*[Turn(input_tokens=1000, output_tokens=1000) for _ in range(2)])
        for _ in range(2):
            ant.messages.create(model=HAIKU, max_tokens=10, messages=[{"role": "user", "content": q}])
        with pytest.raises(anthropic.RateLimitError) as err:
            ant.messages.create(model=HAIKU, max_tokens=10, messages=[{"role": "user", "content": q}])
        yield err.value, gw.record(3), seen_by(provider, q)


def test_the_call_past_max_cost_gets_an_anthropic_shaped_429(max_cost_run):
    err, _, seen = max_cost_run
    assert (err.status_code, err.body, len(seen)) == (429, {"type": "error", "error": {
        "type": "rate_limit_error", "message": "svc budget exceeded: max_cost_usd 0.01 reached ($0.012000 spent)"}}, 2)


def test_the_call_past_max_cost_has_a_refused_record_line(max_cost_run):
    _, rec, _ = max_cost_run
    assert (rec["status"], rec["refused"]["limit"], rec["refused"]["spent"]["cost_usd"]) == (
        429, "max_cost_usd", pytest.approx(0.012))


# --- replay ---------------------------------------------------------------------------------------------


def session(gw: GatewayProcess) -> dict[str, Any]:
    """An agent's calls: the SDKs' results and the raw bytes of one streamed answer."""
    oai, ant = clients(gw)
    out: dict[str, Any] = {}
    out["first"] = oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "q1"}]).choices[0].message.content
    out["chat-stream"] = chat_stream(oai, ant, "q2")
    out["messages-stream"] = messages_stream(oai, ant, "q3")
    out["again"] = oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "q1"}]).choices[0].message.content
    with httpx.stream("POST", gw.openai_url + "/chat/completions", headers={"Authorization": f"Bearer {gw.token}"},
                      json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "q5"}],
                            "stream": True}) as resp:
        out["raw"] = b"".join(resp.iter_raw())
    return out


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A live session recorded, the provider stopped, the same session replayed, then requests the
    recording does not hold."""
    workdir = tmp_path_factory.mktemp("replay")
    server = ProviderServer().start()
    try:
        server.script(Turn(text="first answer"),
                      Turn(text="", tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="call_q2")], gap_s=0.01),
                      Turn(text="héllo ✓", tool_calls=[ToolCall("get_weather", {"city": "Rome"}, id="toolu_q3")]),
                      Turn(text="second answer"), Turn(text="raw ✓ bytes", pieces=8))
        with GatewayProcess(workdir, providers(server), name="live", pricing=PRICING, allow_private=True) as live:
            recorded = session(live)
            live.record(5)  # each line is written once its call completed
            live_records = live.records()
    finally:
        server.stop()
    upstream_requests = len(server.requests)
    with GatewayProcess(workdir, providers(server), name="replay", pricing=PRICING, allow_private=True,
                        mode="replay", replay_file=str(live.record_file)) as gw:
        again = session(gw)
        with pytest.raises(openai.ConflictError) as past:
            clients(gw)[0].responses.create(model="gpt-4o-mini", input="not recorded")
        gw.record(6)
        replay_records = gw.records()
    errors = {"past": past.value}
    with GatewayProcess(workdir, providers(server), name="diverge", pricing=PRICING, allow_private=True,
                        mode="replay", replay_file=str(live.record_file)) as gw:
        oai, _ = clients(gw)
        for name, kwargs in {  # call #1 against recorded call #1, call #2 against recorded call #2
            "model": {"model": "gpt-4o", "messages": [{"role": "user", "content": "q1"}]},
            "message": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "q1 changed"}]},
        }.items():
            with pytest.raises(openai.ConflictError) as err:
                oai.chat.completions.create(**kwargs)
            errors[name] = err.value
        diverged = gw.record(2)
    yield {"recorded": recorded, "again": again, "live": live_records, "replay": replay_records, "errors": errors,
           "diverged": diverged, "upstream_requests": (upstream_requests, len(server.requests))}


def test_replay_answers_every_call_as_recorded_with_the_provider_stopped(replayed):
    assert replayed["again"] == replayed["recorded"]


def test_replay_keeps_repeated_requests_apart_by_occurrence(replayed):
    assert (replayed["again"]["first"], replayed["again"]["again"]) == ("first answer", "second answer")


def test_replay_re_emits_streams_chunk_for_chunk(replayed):
    def chunks(records: list[dict[str, Any]]) -> list[list[str]]:
        return [[text for _, text in r["chunks"]] for r in sorted(records, key=lambda r: r["seq"]) if r["stream"]]
    assert chunks([r for r in replayed["replay"] if r["seq"] <= 5]) == chunks(replayed["live"])


def test_replay_records_say_replayed(replayed):
    assert [(r["seq"], r["replayed"], r["replay_of"]) for r in replayed["replay"] if r["seq"] <= 5] == [
        (n, True, n) for n in range(1, 6)]


def test_replay_makes_no_upstream_request(replayed):
    before, after = replayed["upstream_requests"]
    assert (before, after) == (5, 5)


def test_a_changed_message_gets_a_409_naming_it(replayed):
    err = replayed["errors"]["message"]
    assert (err.status_code, err.body["message"]) == (409, "svc replay diverged: call #2 (POST /chat/completions): "
                                                   "messages[0].content differs: q1 changed vs q2 (recorded call #2)")


def test_a_changed_model_names_both_models(replayed):
    assert replayed["errors"]["model"].body["message"].endswith("model differs: gpt-4o vs gpt-4o-mini (recorded call #1)")


def test_a_call_the_recording_lacks_names_its_number(replayed):
    assert replayed["errors"]["past"].body["message"].endswith("no recorded call #6 (the recording has 5)")


def test_a_diverged_call_has_a_refused_record_line(replayed):
    rec = replayed["diverged"]
    assert (rec["status"], rec["refused"]) == (409, {
        "reason": "replay_diverged", "seq": 2,
        "detail": "messages[0].content differs: q1 changed vs q2 (recorded call #2)"})
