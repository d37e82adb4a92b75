"""Nothing a tenant sends makes the daemon answer 5xx.

Every write route (POST/PUT/PATCH), enumerated from the app's router, gets deeply nested JSON,
invalid UTF-8 and bodies with NUL bytes; every route with a path parameter gets hostile ids. Each
answer must be a 4xx with the SPEC error body (`error`, `message`, `request_id`).
"""
from __future__ import annotations

import asyncio
import json
import re

import aiohttp
import pytest

from daemon.errors import InvalidRequest
from daemon.http import MAX_JSON_DEPTH, decode_json
from daemon.http import ROUTE_INFOS

DEPTH = 5000
NESTED_LIST = b"[" * DEPTH + b"]" * DEPTH
NESTED_OBJECT = b'{"a":' * DEPTH + b"1" + b"}" * DEPTH
# Nested inside a field the model accepts as free-form, so only the depth can reject it.
NESTED_IN_FIELD = b'{"name":"x","events":[{"metadata":' + b'{"a":' * DEPTH + b"1" + b"}" * DEPTH + b"}]}"
INVALID_UTF8 = b'{"name": "\xff\xfe\xfd", "yaml": "\xc3\x28"}'
NUL_BODY = b'{"name": "a\x00b", "yaml": "\x00"}'
NUL_ONLY = b"\x00" * 64
HUGE_NUMBER = b'{"name": "x", "limit": ' + b"9" * 5000 + b"}"
BODIES = {
    "nested list": NESTED_LIST,
    "nested object": NESTED_OBJECT,
    "nested in a field": NESTED_IN_FIELD,
    "invalid utf-8": INVALID_UTF8,
    "nul bytes": NUL_BODY,
    "only nul bytes": NUL_ONLY,
    "huge number": HUGE_NUMBER,
}
# (id as sent in the URL, refused whatever the route: traversal, NUL, control characters, kilobytes)
HOSTILE_IDS = [
    ("..%2F..%2F..%2Fetc%2Fpasswd", True),
    ("%2e%2e%2f%2e%2e%2fsvc.db", True),
    ("a%00b", True),
    ("%00", True),
    ("x" * 4000, True),
    ("%0d%0aX-Injected:%201", True),
    # odd but harmless: an unknown id (404), or an empty result where the id is only a filter
    ("%ff%fe", False),
    ("%252e%252e%252f", False),
    ("%F0%9F%92%A9" * 50, False),
    ("..", False),  # normalised away by the client; what reaches the server is another route
]


def _concrete(path: str, value: str = "hostile-id") -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def _routes(app, methods: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for route in app.router.routes():
        if route.method not in methods:
            continue
        info = route.resource.get_info()
        path = info.get("formatter") or info.get("path")
        out.append((route.method, path))
    assert out, "no routes found"
    return sorted(set(out))


def _content_types(app, method: str, path: str) -> tuple[str, ...]:
    for info in app[ROUTE_INFOS]:
        if info.method == method and re.sub(r"\{(\w+)(:[^}]*)?\}", r"{\1}", info.path) == path:
            return info.content_types
    return ("application/json",)


def _body_for(content_type: str, raw: bytes) -> tuple[bytes, str]:
    if content_type == "multipart/form-data":
        boundary = "hostileboundary"
        body = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n".encode()
            + raw
            + f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.tar.gz\"\r\n"
              f"Content-Type: application/gzip\r\n\r\n".encode()
            + b"\x1f\x8b\x08\x00" + b"\x00" * 16
            + f"\r\n--{boundary}--\r\n".encode()
        )
        return body, f"multipart/form-data; boundary={boundary}"
    return raw, content_type


def _assert_error_body(response, body, what: str) -> None:
    assert 400 <= response.status < 500, f"{what}: {response.status} {body}"
    assert isinstance(body, dict), f"{what}: not a JSON error body: {body!r}"
    assert body.get("error") and body.get("message") and body.get("request_id"), f"{what}: {body}"


async def test_every_write_route_refuses_hostile_bodies(api):
    routes = _routes(api.app, ("POST", "PUT", "PATCH"))
    seen = 0
    for method, path in routes:
        for content_type in _content_types(api.app, method, path):
            for name, raw in BODIES.items():
                data, ct = _body_for(content_type, raw)
                response, body = await api.call(method, _concrete(path), data=data, headers={"Content-Type": ct})
                _assert_error_body(response, body, f"{method} {path} [{ct}] {name}")
                seen += 1
    assert seen >= len(routes) * len(BODIES)


async def test_nested_json_is_400_naming_the_problem(api):
    for path in ("/v1/traces", "/v1/keys", "/v1/tenants", "/v1/specs", "/v1/webhooks"):
        for raw in (NESTED_LIST, NESTED_OBJECT):
            response, body = await api.post(path, data=raw, headers={"Content-Type": "application/json"})
            assert response.status == 400, (path, body)
            assert body["error"] == "invalid_request" and "nested" in body["message"], (path, body)
    for ct in ("application/json", "application/x-protobuf"):
        response = await api.client.post("/otel/v1/traces", data=NESTED_OBJECT if ct.endswith("json") else NESTED_LIST,
                                          headers=api.headers(extra={"Content-Type": ct}))
        body = await response.json(content_type=None)
        _assert_error_body(response, body, f"otel {ct}")
    # a field nested past the limit but within what the parser can do
    moderate = b'{"events":[{"event_type":"span","metadata":' + b'{"a":' * (MAX_JSON_DEPTH + 5) + b"1" + b"}" * (MAX_JSON_DEPTH + 5) + b"}]}"
    response, body = await api.post("/v1/traces", data=moderate, headers={"Content-Type": "application/json"})
    assert response.status == 400 and "nested" in body["message"], body


async def test_routes_with_path_params_refuse_hostile_ids(api):
    routes = [(m, p) for m, p in _routes(api.app, ("GET", "POST", "PUT", "DELETE", "PATCH")) if "{" in p]
    assert len(routes) > 20
    for method, path in routes:
        for hostile, refused in HOSTILE_IDS:
            url = _concrete(path, hostile)
            kw = {"data": b"{}", "headers": {"Content-Type": "application/json"}} if method in ("POST", "PUT", "PATCH") else {}
            response, body = await api.call(method, url, **kw)
            if refused or response.status >= 400:
                _assert_error_body(response, body, f"{method} {url[:120]}")
            if refused and "{path" not in path:
                assert response.status == 400 and body["details"]["errors"][0]["loc"].startswith("path."), (url[:120], body)
        # and GET on every such path, whatever its method
        response, body = await api.get(_concrete(path, HOSTILE_IDS[0][0]))
        _assert_error_body(response, body, f"GET {path}")


async def test_hostile_query_strings(api):
    for path in ("/v1/traces", "/v1/spans", "/v1/keys", "/v1/specs", "/v1/runs", "/v1/sandboxes", "/v1/experiments",
                 "/v1/webhooks", "/v1/agents", "/v1/scenarios"):
        for query in ("limit=%00", "cursor=%00%ff", "limit=" + "9" * 5000, "since=%00", "order=%ff", "cursor=" + "A" * 3000,
                      "status=%00&spec_id=..%2F..", "format=%00"):
            response, body = await api.get(f"{path}?{query}")
            assert response.status < 500, (path, query, body)
            if response.status >= 400:
                _assert_error_body(response, body, f"{path}?{query}")


async def _raw_request(api, head: bytes) -> tuple[int, bytes]:
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(head)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(65536), 10)
    finally:
        writer.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data


async def test_nul_bytes_in_headers_and_raw_paths(api):
    auth = f"Authorization: Bearer {api.key}\r\n".encode()
    # malformed requests are refused with 400; keys that cannot be valid are 401 unauthorized
    for head, expected in (
        (b"GET /v1/keys HTTP/1.1\r\nHost: x\r\nX-Request-ID: a\x00b\r\n" + auth + b"\r\n", 400),
        (b"GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x00\x00\r\n\r\n", 400),
        (b"GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer svc_live_\xff\xfe\x80\r\n\r\n", 401),
        (b"GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer svc_sb_\xed\xa0\x80\r\n\r\n", 401),
        (b"GET /v1/keys?limit=\xff HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n", 400),
        (b"GET /v1/specs/a\x00b HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n", 400),
        (b"GET /v1/specs/" + b"x" * 20000 + b" HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n", 400),
        (b"GET /v1/specs/%ff%00 HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n", 400),
        (b"POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: \xff\xfe\r\n"
         + auth + b"Content-Length: 12\r\n\r\n{\"name\":\"x\"}", 400),
    ):
        status, data = await _raw_request(api, head)
        assert status == expected, (head[:80], data[:300])
    response = await api.client.get("/health")
    assert response.status == 200


def test_decode_json_names_each_problem():
    cases = {
        NESTED_LIST: "nested",
        NESTED_OBJECT: "nested",
        b"\xff": "UTF-8",
        b'{"a": 1' : "malformed JSON",
        b'{"a": "\x00"}': "malformed JSON",
        b"[" + b"9" * 5000 + b"]": "number",
        b"": "empty",
    }
    for raw, words in cases.items():
        with pytest.raises(InvalidRequest) as caught:
            decode_json(raw)
        assert words in caught.value.message, (raw[:20], caught.value.message)
    assert decode_json(b'{"a": [1, {"b": "\\u0000"}]}') == {"a": [1, {"b": "\x00"}]}
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert decode_json(ok) is not None
    deep_in_string = json.dumps({"s": "[" * 10000}).encode()
    assert decode_json(deep_in_string) == {"s": "[" * 10000}


async def test_the_server_answers_after_all_that(api):
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{api.client.server.host}:{api.client.server.port}/health") as response:
            assert response.status == 200


async def test_hostile_patterns_in_a_spec_are_400(api):
    from tests.support.specs import SPEC_YAML

    for pattern in ("(" * 5000 + ")" * 5000, "a{4294967296}", "(?P<x>", "[z-a]"):
        yaml_text = SPEC_YAML + f"  matched:\n    check:\n      type: file_content\n      path: hello.txt\n      regex: {json.dumps(pattern)}\n"
        response, body = await api.post("/v1/specs", json={"name": "hello", "yaml": yaml_text})
        _assert_error_body(response, body, f"regex {pattern[:20]}")
        assert body["error"] == "invalid_request" and "regular expression" in json.dumps(body), body


async def test_lone_surrogates_and_out_of_range_numbers_are_400(api):
    for raw in (b'{"name": "\\ud800"}', b'{"name": "x\\udfff"}', b'{"name": "x", "n": 1e999}', b'{"name": NaN}',
                b'{"name": "x", "n": 99999999999999999999}'):
        response, body = await api.post("/v1/keys", data=raw, headers={"Content-Type": "application/json"})
        _assert_error_body(response, body, raw.decode())
        assert body["error"] == "invalid_request"
    response, body = await api.post("/v1/keys", data='{"name": "\\ud83d\\ude00ok"}'.encode(), headers={"Content-Type": "application/json"})
    assert response.status == 201, body  # a valid pair is text like any other
    response, body = await api.post("/v1/traces", json={"events": [{"event_type": "llm_call", "duration_ms": 7.9e307,
                                                                     "cost": {"input_tokens": 2**62}}]})
    assert response.status == 202 and body["rejected"] == 1, body
