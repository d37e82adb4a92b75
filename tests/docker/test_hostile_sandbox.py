"""What an agent controls cannot stall the daemon or leak a secret, against real sandboxes:

- a catastrophic regular expression on an agent's file runs off the event loop with a time limit:
  the invariant fails with evidence `{timeout: true}` and /health keeps answering meanwhile;
- trace events posted for a sandbox (JSON, OTLP/JSON, OTLP protobuf; with the tenant's key and from
  inside the sandbox with its token) have the sandbox's secret values replaced by `***`;
- a workspace file is streamed back byte for byte.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from daemon.main import start_unix_sites
from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.runs import cli_spec, inv, result, run_spec
from tests.support.specs import spec
from daemon.appkeys import SETTINGS, TRACE_WRITER

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "plum-orbit-4711-quasar-Kx"
LINE = "a" * 55 + "!"


class HealthPoller:
    """GET /health from another thread (a blocking client with a short timeout), so a pinned event
    loop would show up as timeouts here even though the test's own loop is that same loop."""

    def __init__(self, url: str, timeout_s: float = 2.0):
        self.url, self.timeout_s = url, timeout_s
        self.ok: list[float] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=self.timeout_s) as response:
                    assert response.status == 200
                self.ok.append(time.monotonic())
            except Exception as exc:  # noqa: BLE001 - recorded
                self.failed.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(0.05)

    def __enter__(self) -> "HealthPoller":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


async def test_a_catastrophic_regex_times_out_and_health_keeps_answering(api, monkeypatch):
    # A check pinned on the loop until its limit (8 s) silences /health for 8 s or more; a passing
    # stall of the loaded CI machine (seen: one poll over 4 s) stays well under that.
    monkeypatch.setenv("SERVICE_CHECK_TIME_LIMIT_S", "8")
    doc = cli_spec("regex-bomb", f"printf '%s\\n' '{LINE}' > evil.txt; echo fine > ok.txt", {
        # exponential for a backtracking engine on 55 a's and a '!': Python's re pins the loop for hours
        "catastrophic": inv({"type": "file_content", "path": "evil.txt", "regex": r"^(a|aa)+$"}),
        "nested": inv({"type": "file_content", "path": "evil.txt", "regex": r"^(a+)+$"}),
        "still_scored": inv({"type": "file_content", "path": "ok.txt", "regex": r"^fine$"}),
    })
    url = str(api.client.make_url("/health"))
    with HealthPoller(url, timeout_s=30.0) as poller:
        started = time.monotonic()
        run = await run_spec(api, doc)
        ended = time.monotonic()
    bomb = result(run, "catastrophic")
    assert bomb["status"] == "failed", bomb
    assert bomb["evidence"]["timeout"] is True and bomb["evidence"]["time_limit_s"] == 8.0, bomb
    assert result(run, "nested")["status"] == "failed"  # no match (the regex engine is not fooled by this one)
    assert result(run, "still_scored")["status"] == "passed"
    assert run["status"] == "failed"
    answered = [started, *(t for t in poller.ok if started <= t <= ended), ended]
    longest_silence_s = max(later - earlier for earlier, later in zip(answered, answered[1:]))
    assert longest_silence_s < 6.0, (longest_silence_s, poller.failed[:3])


async def test_custom_check_output_that_cannot_be_parsed_fails_the_check(api):
    nested = "[" * 5000 + "]" * 5000
    doc = cli_spec("custom-bomb", "true", {
        "nested": inv({"type": "custom", "command": f"printf '%s' '{{\"passed\": true, \"x\": {nested}}}'"}),
    })
    run = await run_spec(api, doc)
    check = result(run, "nested")
    assert check["status"] == "failed" and "did not print a JSON object" in check["evidence"]["error"], check


def _otlp_json(sandbox_secret: str) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
                               "scopeSpans": [{"spans": [{
                                   "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                                   "name": "login", "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
                                   "attributes": [
                                       {"key": "gen_ai.tool.name", "value": {"stringValue": "login"}},
                                       {"key": "input.value", "value": {"stringValue": f"password={sandbox_secret}"}},
                                       {"key": "custom.note", "value": {"stringValue": f"used {sandbox_secret} twice"}},
                                   ]}]}]}]}


def _otlp_protobuf(sandbox_secret: str) -> bytes:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    data = _otlp_json(sandbox_secret)
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()
    span["spanId"] = base64.b64encode(bytes.fromhex("aaa19b7ec3c1b174")).decode()
    message = ExportTraceServiceRequest()
    json_format.ParseDict(data, message)
    return message.SerializeToString()


IN_SANDBOX_POST = r"""
import http.client, json, os, socket
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/run/svc/svcd.sock")
token = os.environ["API_TOKEN"]
body = json.dumps({"events": [{"event_type": "tool_call", "tool": "login", "input": {"token": token},
                               "output": "logged in with " + token, "metadata": {"note": token, token: "as a key"}}]})
conn = Unix("localhost")
conn.request("POST", "/v1/sandboxes/%s/trace" % os.environ["SERVICE_SANDBOX_ID"], body,
             {"Authorization": "Bearer " + os.environ["SERVICE_SANDBOX_TOKEN"], "Content-Type": "application/json"})
print(conn.getresponse().status)
"""


async def test_trace_ingest_replaces_sandbox_secrets(stock_images):
    api = await start_api()
    await start_unix_sites(api.client.server.runner, api.app[SETTINGS])
    try:
        doc = spec("secret-traces", secrets={"API_TOKEN": "env"}, agent={"type": "cli", "binary": "python3"})
        sandbox = await api.create_from_spec(doc, secrets={"API_TOKEN": SECRET})
        assert sandbox["state"] == "ready", sandbox
        sandbox_id = sandbox["id"]
        encoded = base64.b64encode(f"user:{SECRET}".encode()).decode()

        # 1. JSON events with the tenant's key: the value, URL-quoted, inside base64, as a key, cut at 4 KB
        events = {"events": [
            {"event_type": "llm_call", "tool": "chat", "input": [{"role": "user", "content": f"my key is {SECRET}"}],
             "output": f"ok {quote(SECRET + '/x', safe='')} and Basic {encoded}", "metadata": {"k": SECRET, SECRET: 1}},
            {"event_type": "span", "tool": "big", "output": "x" * 4060 + SECRET + "y" * 100},
            {"event_type": "span", "tool": SECRET, "error_type": f"E{SECRET}", "status": "error"},
        ]}
        response, body = await api.post(f"/v1/sandboxes/{sandbox_id}/trace", json=events)
        assert response.status == 202 and body["accepted"] == 3, body
        # 2. OTLP/JSON and OTLP protobuf on the same endpoint
        response, body = await api.post(f"/v1/sandboxes/{sandbox_id}/trace", json=_otlp_json(SECRET))
        assert response.status == 200, body
        response = await api.client.post(f"/v1/sandboxes/{sandbox_id}/trace", data=_otlp_protobuf(SECRET),
                                          headers={"Authorization": f"Bearer {api.key}", "Content-Type": "application/x-protobuf"})
        assert response.status == 200, await response.text()
        # 3. from inside the sandbox, with its token, over the daemon socket
        (Path(api.manager.workspace_path(sandbox_id)) / "post.py").write_text(IN_SANDBOX_POST)
        posted = await api.run(sandbox_id, "python3 /workspace/post.py")
        assert posted["stdout"].strip() == "202", posted

        await api.app[TRACE_WRITER].flush()
        response, page = await api.get(f"/v1/sandboxes/{sandbox_id}/trace?limit=1000")
        assert response.status == 200 and page["count"] == 6, page
        text = json.dumps(page)
        for form in (SECRET, quote(SECRET, safe=""), base64.b64encode(SECRET.encode()).decode()[:16]):
            assert form not in text, form
        assert text.count("***") >= 8
        by_tool = {e["tool"]: e for e in page["items"]}
        assert by_tool["login"]["input"] in ('{"token":"***"}', "password=***")
        big = by_tool["big"]["output"]
        assert "x***y" in big and "truncated" in big and SECRET[:8] not in big  # redacted before it was cut to size
        # what the database holds
        con = sqlite3.connect(f"file:{api.app[SETTINGS].db_path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT input, output, metadata, tool, error_type FROM trace_events WHERE sandbox_id = ?",
                               (sandbox_id,)).fetchall()
        finally:
            con.close()
        assert len(rows) == 6 and SECRET not in json.dumps(rows)
        response, _ = await api.delete(f"/v1/sandboxes/{sandbox_id}")
        assert response.status == 204
    finally:
        await stop_api(api)


async def test_a_workspace_file_is_streamed_back(api):
    sandbox = await api.create_from_spec(spec("stream-file"))
    sandbox_id = sandbox["id"]
    try:
        data = hashlib.sha256(b"seed").digest() * (40 * 1024 * 1024 // 32 + 7)  # 40 MiB and a bit
        (Path(api.manager.workspace_path(sandbox_id)) / "big.bin").write_bytes(data)
        response = await api.client.get(f"/v1/sandboxes/{sandbox_id}/files/big.bin",
                                        headers={"Authorization": f"Bearer {api.key}"})
        assert response.status == 200 and int(response.headers["Content-Length"]) == len(data)
        digest, size = hashlib.sha256(), 0
        async for chunk in response.content.iter_chunked(1 << 20):
            digest.update(chunk)
            size += len(chunk)
        assert size == len(data) and digest.hexdigest() == hashlib.sha256(data).hexdigest()
        response, body = await api.get(f"/v1/sandboxes/{sandbox_id}/files/missing.bin")
        assert response.status == 404 and body["error"] == "not_found"
    finally:
        await api.delete(f"/v1/sandboxes/{sandbox_id}")


async def test_hostile_requests_on_a_live_sandbox_are_4xx(api):
    sandbox = await api.create_from_spec(spec("hostile-requests"))
    sandbox_id = sandbox["id"]
    try:
        cases = [
            ("commands", {"command": "echo a\u0000b"}), ("commands", {"command": ["echo", "a\u0000b"]}),
            ("commands", {"command": "true", "env": {"A\u0000": "x"}}), ("commands", {"command": "true", "env": {"A": "x\u0000"}}),
            ("commands", {"command": "true", "env": {"": "x"}}), ("commands", {"command": "true", "env": {"A=B": "x"}}),
            ("commands", {"command": "true", "workdir": "/work\u0000space"}), ("commands", {"command": "true", "user": "r\u0000"}),
            ("commands", {"command": "true", "timeout": "99999999999999999h"}), ("commands", {"command": "true", "timeout": 1e308}),
            ("files", {"path": "a\u0000", "content": "x"}), ("files", {"path": "x" * 5000, "content": "x"}),
            ("files", {"path": "../../etc/passwd", "content": "x"}), ("files", {"path": "a", "content": "!", "encoding": "base64"}),
            ("timeout", {"timeout": "99999999999999999999d"}), ("timeout", {"timeout": "\u0000"}), ("timeout", {"timeout": -1}),
        ]
        for what, body in cases:
            response, answer = await api.post(f"/v1/sandboxes/{sandbox_id}/{what}", json=body)
            assert response.status == 400, (what, body, answer)
            assert answer["error"] == "invalid_request" and answer["request_id"], answer
        for body in ({"image": PYTHON + "\u0000"}, {"spec_id": "hostile-requests", "env": {"A\u0000B": "v"}},
                     {"spec_id": "hostile-requests", "secrets": {"A=B": "v"}}, {"spec_id": "hostile-requests", "timeout": "9999999d"},
                     {"image": PYTHON, "seed": "\u0000"}):
            response, answer = await api.post("/v1/sandboxes", json=body)
            assert response.status == 400, (body, answer)
        response, listing = await api.get(f"/v1/sandboxes/{sandbox_id}/files/{'d/' * 3000}x")
        assert response.status == 400 and listing["error"] == "invalid_request", listing  # path too long
        assert (await api.run(sandbox_id, "echo still here"))["stdout"].strip() == "still here"
    finally:
        await api.delete(f"/v1/sandboxes/{sandbox_id}")
