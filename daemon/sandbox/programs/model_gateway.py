"""svc's per-sandbox model gateway. Standard library only; runs with the stock python image's
`python3` in its own container, next to the egress proxy (both are mounted at `/svc-programs`).

The agent's `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` point here (`http://svc-models:8480/openai`,
`http://svc-models:8480/anthropic`) and its API key variables hold this sandbox's gateway token; the
real provider keys exist only in this program's configuration file. Each call is forwarded to the
configured provider with the real key, streamed back as it arrives, and recorded as one JSON line
(model, tokens, cost, tool calls and the response itself) that the daemon tails. Budgets refuse a
call before it goes out; in replay mode the recorded answers are served with no upstream connection.

Routes: `/openai/<rest>` -> `providers.openai.base_url + "/" + <rest>`, `/anthropic/<rest>` ->
`providers.anthropic.base_url + "/" + <rest>` (query strings kept), any method and path under a
configured provider. Refused with the provider's error shape: an unconfigured provider (404),
CONNECT (405), an absolute-form target, and a path with a `..`, `.` or empty segment, `@`, `\\`,
a control character or a fragment, raw or percent-decoded (400). `GET /__svc/health` answers 200
without auth.

Auth: `Authorization: Bearer <token>` (scheme case-insensitive) or `x-api-key: <token>`, compared
in constant time; anything else is a 401. The agent's credential headers never go upstream: the
request gets the real key (`Authorization: Bearer` for openai, `x-api-key` for anthropic), `Host`
is the base URL's authority, `Accept-Encoding: identity` (so usage can be read from the response).

Upstreams: only the configured base URLs. Their resolved addresses are checked as the egress proxy
checks them (`egress_proxy.Policy.check_addresses`: not globally routable and the daemon host's
`host_addresses` refused unless `allow_private`), then the checked address is connected to (no
second resolution); https verifies certificates against the system trust store. Connections are
kept alive and reused per provider.

Streams: a `text/event-stream` answer goes to the agent piece by piece as it arrives (chunked
transfer encoding). A piece ending in what could be the start of a provider key, or inside a UTF-8
character, keeps those few bytes until the next piece, so every recorded chunk is text and a key
split across two reads is still redacted. Any configured key in a response (body, chunks, headers)
is replaced by `[REDACTED]` before the agent or the recording sees it.

Record (one JSON line per call to `record_file`, appended and flushed when the call completes):
`seq`, `provider`, `method`, `path` (after the provider prefix, with the query), `request_hash`
(sha256 of the canonical JSON of `[provider, method, path, body]`, `request_hash()` below; body =
the parsed JSON body, `{"sha256": ...}` of a non-JSON body, or null), `occurrence` (1 + earlier
calls of this run with that hash), `request` (parsed JSON body or null), `status`, `content_type`,
`stream`, `body` (non-stream) or `chunks` (`[[offset_ms, text], ...]`, offsets from the call's
start), `started`, `latency_ms`, `ttft_ms` (stream), `model`, `usage` (`input_tokens` counts every
prompt token, cached ones included, as Anthropic's `input_tokens + cache_creation_input_tokens +
cache_read_input_tokens`; `cached_input_tokens` the part read from the prompt cache; all null when
the provider sent no usage), `cost_usd`, `tool_calls` (`id`, `name`, `arguments`), `error`,
`refused`, `replayed` (and `replay_of`, the recorded seq that answered), `request_bytes`, and when
they apply `usage_estimated`, `usage_asked`, `hidden_chunks`, `priced_as`, `truncated`. Bytes that are not UTF-8
are kept as lone surrogates (`surrogateescape`), so a replay re-emits the same bytes.

Cost: `pricing[model] = [input, output, cached_input]` USD per 1M tokens; the response's model
(else the request's) is looked up by its exact name, then normalised (lower-cased, a provider
prefix, a release date or `-latest` removed: `normalise_model`), then in the explicit
`pricing_aliases` table (normalised name -> table key). Nothing else matches: no prefix matching
(`o1-pro` is not `o1`). A model found nowhere, or no model at all, is priced at the highest price
of the table, column by column, and its record says `priced_as: "highest_known"` (else `exact` or
`alias`), so `max_cost_usd` holds for a model svc does not know.

Usage: an OpenAI (Chat) Completions stream whose request did not set
`stream_options.include_usage` is sent upstream with it set (the recorded request is the agent's
own); the usage-only chunk that adds (`choices: []`) is kept from the agent (`UsageFilter`) and
recorded as `hidden_chunks`; the other chunks carry `"usage": null`, a field the API documents
for every chunk. A POST answered 2xx with no usage (a stream the agent or the provider cut, a
provider that ignores the option) is counted with an estimate, `usage_estimated: true`: a token per
4 bytes of the request body and of the answer as it reached the agent (`estimate_usage`). A stream
the agent disconnects from is counted with what was streamed so far (the upstream connection is
closed at once, so the provider stops generating).

Budget (`max_calls`, `max_tokens`, `max_cost_usd`, each optional): a call is refused with a 429 before
going upstream once that many calls were admitted or that many tokens / that much cost were spent.
A call in flight holds its prompt (bytes / 4) and its `max_tokens` (`max_completion_tokens`,
`max_output_tokens`; else 1024) at its price; a new call that finds spent + held at or over a
limit waits for the calls in flight to end, then is admitted or refused on what they really spent,
so a burst of streams whose usage comes only at their end cannot all go out. An admitted call
first writes a line `{"seq", "open": true, "held_tokens", "held_cost_usd"}`: when the agent ends,
the daemon waits for the record of each open call and counts one still open at what it holds.

Size caps: a request body over `max_body` (default 4 MiB) is answered 413 in the provider's shape
(read and dropped up to 64 MiB so the client sees the answer, never kept) and recorded as metadata
(`refused.reason: request_too_large`). A refused call's record has no request. Once the record
file holds `max_recording` bytes (default 64 MiB), each further line is cut to its metadata
(`truncated: true`: no request, answer or tool arguments); replaying such a call diverges.

Replay (`mode: replay`): a request is answered from the `replay_file` line with the same
(`request_hash`, `occurrence`); one without a recording gets a 409 naming how it differs from the
recorded call at the same seq (or the nearest with the same provider, method and path).

Configuration: JSON in the file named by env `SVC_GATEWAY_CONFIG_FILE` (never logged):

    {"listen": "0.0.0.0:8480", "token": "svc-gw-...",
     "providers": {"openai": {"base_url": "https://api.openai.com/v1", "key": "sk-..."},
                   "anthropic": {"base_url": "https://api.anthropic.com", "key": "sk-ant-..."}},
     "mode": "live", "replay_file": null, "record_file": "/svc-gateway-out/calls.jsonl",
     "budget": {"max_cost_usd": 0.5, "max_tokens": 200000, "max_calls": 50},
     "pricing": {"gpt-4o-mini": [0.15, 0.6, 0.075]}, "pricing_aliases": {"claude-opus-4-1": "claude-opus-4"},
     "max_body": 4194304, "max_recording": 67108864, "allow_private": false, "host_addresses": ["172.16.0.1"]}

A provider may name `key_file` (under /run/secrets) instead of `key`: on a swarm the key is a Swarm
secret mounted there, so neither the configuration file nor the service spec holds it.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import ssl
import sys
import time
from typing import Any, AsyncIterator
from urllib.parse import unquote, urlsplit

try:  # run as a script from /svc-programs, next to the egress proxy
    from egress_proxy import Policy, header, parse_headers, tokens
    from provider_wire import NO_USAGE, analyze_json, analyze_stream, as_int, sse_events
except ImportError:  # imported as part of the daemon package
    from daemon.sandbox.programs.egress_proxy import Policy, header, parse_headers, tokens
    from daemon.sandbox.programs.provider_wire import NO_USAGE, analyze_json, analyze_stream, as_int, sse_events

PROVIDERS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
MAX_HEAD = 64 * 1024
MAX_BODY = 4 * 1024 * 1024  # default `max_body`: a bigger request body is refused with a 413
DISCARD_MAX = 64 * 1024 * 1024  # a refused body up to this size is read and dropped (the agent sees the 413)
MAX_RECORDING = 64 * 1024 * 1024  # default `max_recording`: the record file's size past which lines are cut
CHARS_PER_TOKEN = 4  # the estimate of a call whose provider reported no usage
OUTPUT_RESERVE = 1024  # output tokens held for a call in flight that names no max_tokens
READ_PIECE = 64 * 1024
CONNECT_TIMEOUT = 10.0
UPSTREAM_IDLE = 600.0  # a model may think for minutes before its first byte
CLIENT_IDLE = 600.0
POOL_MAX = 64  # idle upstream connections kept per provider
DNS_TTL = 30.0
REDACTED = "[REDACTED]"
MIN_SECRET = 8  # shorter "keys" (test placeholders) would redact ordinary text
KEY_DIR = "/run/secrets"  # where `key_file`s may be: a Swarm secret's directory
MAX_KEY = 16 * 1024
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
REQUEST_DROP = CREDENTIAL_HEADERS | {"host", "connection", "keep-alive", "proxy-connection", "te", "trailer",
                                     "transfer-encoding", "upgrade", "content-length", "expect", "accept-encoding"}
RESPONSE_DROP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "content-length",
                           "trailer", "upgrade"})
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large", 429: "Too Many Requests",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 502: "Bad Gateway"}
# status -> (OpenAI error type, Anthropic error type); the SDKs pick their exception by status.
ERROR_TYPES = {400: ("invalid_request_error", "invalid_request_error"),
               401: ("invalid_request_error", "authentication_error"),
               403: ("permission_denied", "permission_error"), 404: ("not_found", "not_found_error"),
               405: ("invalid_request_error", "invalid_request_error"),
               409: ("replay_diverged", "invalid_request_error"),
               413: ("invalid_request_error", "request_too_large"), 429: ("budget_exceeded", "rate_limit_error"),
               431: ("invalid_request_error", "invalid_request_error"), 500: ("server_error", "api_error"),
               502: ("upstream_error", "api_error")}
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class ConfigError(ValueError):
    pass


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class TooLarge(Exception):
    """A request body over `max_body` (`drained`: read to its end, the connection may go on)."""

    def __init__(self, size: int, drained: bool):
        super().__init__(f"request body of {size} bytes")
        self.size = size
        self.drained = drained


async def discard(reader: asyncio.StreamReader, n: int) -> None:
    while n > 0:
        async with asyncio.timeout(CLIENT_IDLE):
            data = await reader.read(min(READ_PIECE, n))
        if not data:
            raise asyncio.IncompleteReadError(b"", n)
        n -= len(data)


class UpstreamRefused(Exception):
    """The upstream's addresses are not allowed (a private address without allow_private)."""


class UpstreamFailed(Exception):
    """Resolving, connecting to or reading from the upstream failed."""


_LOG_SECRETS: list[str] = []  # the provider keys, scrubbed from every log line whatever put them there


def log(message: str) -> None:
    for secret in _LOG_SECRETS:
        message = message.replace(secret, REDACTED)
    sys.stderr.write(f"svc model gateway: {message}\n")
    sys.stderr.flush()


# --- pure helpers (unit-tested) ----------------------------------------------------------------


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def request_hash(provider: str, method: str, path: str, body: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of [provider, method, path, body]."""
    return hashlib.sha256(canonical([provider, method.upper(), path, body])).hexdigest()


def hash_body(raw: bytes) -> tuple[Any, Any]:
    """(the parsed JSON body or None, what the request hash covers)."""
    if not raw:
        return None, None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None, {"sha256": hashlib.sha256(raw).hexdigest()}
    return parsed, parsed


def as_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def path_refusal(target: str) -> str | None:
    """Why a request path may not be forwarded (None: it may). Checked raw and percent-decoded, so
    no spelling of a segment can make the upstream URL leave the provider's base path or host."""
    if "#" in target:
        return "a fragment"
    path = target.partition("?")[0]
    for form in (path, unquote(path)):
        if "\\" in form:
            return "a backslash"
        if "@" in form:
            return "an '@'"
        if _CONTROL.search(form):
            return "a control character or space"
        segments = form.split("/")[1:]
        for i, seg in enumerate(segments):
            if seg in (".", ".."):
                return f"a '{seg}' segment"
            if seg == "" and i < len(segments) - 1:
                return "an empty segment ('//')"
    return None


def utf8_tail(buf: bytes) -> int:
    """How many bytes at the end of `buf` are an incomplete UTF-8 character."""
    n = len(buf)
    for i in range(1, min(4, n) + 1):
        b = buf[n - i]
        if b & 0xC0 == 0x80:
            continue
        need = 4 if b >= 0xF0 else 3 if b >= 0xE0 else 2 if b >= 0xC0 else 1
        return i if need > i else 0
    return 0


def secret_tail(buf: bytes, secret: bytes) -> int:
    """The length of the longest end of `buf` that is a proper start of `secret`."""
    start = max(0, len(buf) - len(secret) + 1)
    i = buf.find(secret[:1], start)
    while i != -1:
        if secret.startswith(buf[i:]):
            return len(buf) - i
        i = buf.find(secret[:1], i + 1)
    return 0


class Cutter:
    """Splits a stream into pieces that are whole UTF-8 text and never end inside a secret."""

    __slots__ = ("secrets", "pending")

    def __init__(self, secrets: list[bytes]):
        self.secrets = secrets
        self.pending = b""

    def redact(self, data: bytes) -> bytes:
        for secret in self.secrets:
            if secret in data:
                data = data.replace(secret, REDACTED.encode())
        return data

    def feed(self, data: bytes) -> bytes:
        buf = self.pending + data if self.pending else data
        keep = utf8_tail(buf)
        for secret in self.secrets:
            keep = max(keep, secret_tail(buf, secret))
        if keep:
            self.pending = buf[-keep:]
            buf = buf[:-keep]
        else:
            self.pending = b""
        return self.redact(buf)

    def flush(self) -> bytes:
        buf, self.pending = self.pending, b""
        return self.redact(buf)


_PROVIDER_PREFIX = re.compile(r"^(?:openai|anthropic|google|azure|bedrock|vertex_ai|vertex|models)/")
_DATE_SUFFIX = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8})|-latest)$")


def normalise_model(model: str) -> str:
    """The name a price is looked up by: lower-cased, a provider prefix (`openai/`), a Bedrock
    `anthropic.` prefix and `-v1:0` suffix, and a release date (`-2024-08-06`, `-20241022`,
    `@20240620`) or `-latest` removed. Never shortened further: `o1-pro` stays `o1-pro`."""
    name = model.strip().lower()
    while True:
        stripped = _PROVIDER_PREFIX.sub("", name)
        if stripped == name:
            break
        name = stripped
    if name.startswith("anthropic."):
        name = name[len("anthropic."):]
    name = re.sub(r"-v\d+(?::\d+)?$", "", name)
    return _DATE_SUFFIX.sub("", name)


def highest_price(pricing: dict[str, Any]) -> list[float] | None:
    """The highest input, output and cached-input prices of the table, column by column."""
    if not pricing:
        return None
    rows = [[float(v[0]), float(v[1]), float(v[2]) if len(v) > 2 and v[2] is not None else float(v[0])]
            for v in pricing.values()]
    return [max(r[0] for r in rows), max(r[1] for r in rows), max(r[2] for r in rows)]


def price_for(pricing: dict[str, Any], model: str | None,
              aliases: dict[str, str] | None = None) -> tuple[list[float] | None, str | None]:
    """(price, how it was found): `exact` (the name, or its normalised form, is a table key),
    `alias` (the normalised name is in the explicit alias table, which names a table key) or
    `highest_known` (anything else, no model name included: the highest prices of the table, so a
    budget in dollars holds for a model svc does not know). No prefix matching: `o1-pro` is not `o1`."""
    if pricing:
        if model:
            for name in (model, model.lower(), normalise_model(model)):
                if name in pricing:
                    return pricing[name], "exact"
            target = (aliases or {}).get(normalise_model(model))
            if target is not None and target in pricing:
                return pricing[target], "alias"
        return highest_price(pricing), "highest_known"
    return None, None


def cost_of(pricing: dict[str, Any], model: str | None, usage: dict[str, Any],
            aliases: dict[str, str] | None = None) -> tuple[float | None, str | None]:
    """(USD, priced_as) of one call; (None, None) when the token counts are unknown or there is no table."""
    inp, out = usage.get("input_tokens"), usage.get("output_tokens")
    if inp is None and out is None:
        return None, None
    price, priced_as = price_for(pricing, model, aliases)
    if price is None:
        return None, None
    inp = max(0, inp or 0)
    cached = min(max(0, usage.get("cached_input_tokens") or 0), inp)
    out = max(0, out or 0)
    p_in, p_out = float(price[0]), float(price[1])
    p_cached = float(price[2]) if len(price) > 2 and price[2] is not None else p_in
    return round(((inp - cached) * p_in + cached * p_cached + out * p_out) / 1_000_000, 10), priced_as


def estimate_usage(request_bytes: int, answer_bytes: int) -> dict[str, Any]:
    """The usage counted for a call whose provider reported none (a stream cut by the agent or the
    provider, a provider that ignores `stream_options`): a token per CHARS_PER_TOKEN bytes of the
    request body and of the answer as it reached the agent (SSE framing included). Rough and high
    on purpose: it only has to make a budget hold, never to bill."""
    return {"input_tokens": -(-max(0, request_bytes) // CHARS_PER_TOKEN),
            "output_tokens": -(-max(0, answer_bytes) // CHARS_PER_TOKEN), "cached_input_tokens": 0}


def wants_stream_usage(provider: str, method: str, path: str, request: Any) -> bool:
    """An OpenAI (Chat) Completions stream that did not ask for its usage: the gateway asks for it."""
    if provider != "openai" or method != "POST" or not isinstance(request, dict) or request.get("stream") is not True:
        return False
    if not path.partition("?")[0].rstrip("/").endswith("completions"):
        return False
    options = request.get("stream_options")
    return not (isinstance(options, dict) and options.get("include_usage") is True)


def with_stream_usage(request: dict[str, Any]) -> bytes:
    options = request.get("stream_options") if isinstance(request.get("stream_options"), dict) else {}
    return json.dumps({**request, "stream_options": {**options, "include_usage": True}},
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
MAX_PENDING_EVENT = 1024 * 1024


def usage_only_event(event: bytes) -> bool:
    """The chunk OpenAI adds at the end of a stream when `include_usage` is asked: no choices, a usage."""
    if b'"usage"' not in event or b'"choices"' not in event:
        return False
    for _, data in sse_events(as_text(event)):
        try:
            o = json.loads(data)
        except ValueError:
            return False
        return isinstance(o, dict) and o.get("choices") == [] and isinstance(o.get("usage"), dict)
    return False


class UsageFilter:
    """Keeps the usage-only chunk of a stream from an agent that did not ask for it (the gateway
    asked on its behalf): whole events pass unchanged as they complete, that one is kept aside."""

    __slots__ = ("pending", "hidden")

    def __init__(self) -> None:
        self.pending = b""
        self.hidden: list[str] = []

    def feed(self, data: bytes) -> bytes:
        buf = self.pending + data if self.pending else data
        out = []
        pos = 0
        for m in _EVENT_END.finditer(buf):
            event = buf[pos:m.end()]
            pos = m.end()
            if usage_only_event(event):
                self.hidden.append(as_text(event))
            else:
                out.append(event)
        self.pending = buf[pos:]
        if len(self.pending) > MAX_PENDING_EVENT:  # not SSE after all: pass it on as it is
            out.append(self.pending)
            self.pending = b""
        return b"".join(out)

    def flush(self) -> bytes:
        buf, self.pending = self.pending, b""
        return buf


def upstream_error(status: int, body: str) -> dict[str, str]:
    """The error of a 4xx/5xx answer, in either provider's shape."""
    try:
        o = json.loads(body)
    except ValueError:
        o = None
    err = o.get("error") if isinstance(o, dict) else None
    if isinstance(err, dict):
        return {"type": str(err.get("type") or err.get("code") or f"http_{status}"),
                "message": str(err.get("message") or "")[:500]}
    return {"type": f"http_{status}", "message": body[:500]}


def error_body(shape: str, status: int, message: str, code: str | None = None, kind: str | None = None) -> bytes:
    openai_type, anthropic_type = ERROR_TYPES.get(status, ("server_error", "api_error"))
    if shape == "anthropic":
        return json.dumps({"type": "error", "error": {"type": anthropic_type, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind or openai_type, "param": None,
                                 "code": code}}).encode()


def _short(v: Any) -> str | None:
    s = v if isinstance(v, str) else json.dumps(v)
    return s if len(s) <= 40 and "\n" not in s else None


def json_diff(a: Any, b: Any, path: str = "") -> str | None:
    """The first place where `a` (this request) differs from `b` (the recorded one), None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            p = f"{path}.{k}" if path else str(k)
            if k not in b:
                return f"{p} is not in the recorded request"
            d = json_diff(a[k], b[k], p)
            if d:
                return d
        for k in b:
            if k not in a:
                return f"{f'{path}.{k}' if path else k} is missing (the recorded request has it)"
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = json_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path or 'body'} has {len(a)} items vs {len(b)} recorded"
        return None
    if a == b and type(a) is type(b):
        return None
    sa, sb = _short(a), _short(b)
    if sa is not None and sb is not None:
        return f"{path or 'body'} differs: {sa} vs {sb}"
    return f"{path or 'body'} differs"


# --- state ---------------------------------------------------------------------------------------


class Provider:
    __slots__ = ("name", "scheme", "host", "port", "prefix", "key", "authority", "host_header")

    def __init__(self, name: str, cfg: Any, need_key: bool):
        if name not in PROVIDERS:
            raise ConfigError(f"providers.{name}: unknown provider (known: {', '.join(PROVIDERS)})")
        if not isinstance(cfg, dict):
            raise ConfigError(f"providers.{name}: must be an object with base_url and key")
        base = str(cfg.get("base_url") or PROVIDERS[name])
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https"):
            raise ConfigError(f"providers.{name}.base_url: the scheme must be http or https")
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise ConfigError(f"providers.{name}.base_url: must not carry credentials, a query or a fragment")
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"providers.{name}.base_url: {exc}") from None
        if not parts.hostname:
            raise ConfigError(f"providers.{name}.base_url: has no host")
        self.name = name
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.key = str(cfg.get("key") or "") or _key_file(name, cfg.get("key_file"))
        if need_key and not self.key:
            raise ConfigError(f"providers.{name}.key: missing")
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = f"{shown}:{self.port}"
        default = 443 if self.scheme == "https" else 80
        self.host_header = shown if self.port == default else self.authority

    def credential(self) -> tuple[str, str]:
        if self.name == "anthropic":
            return "x-api-key", self.key
        return "Authorization", f"Bearer {self.key}"


def _key_file(name: str, path: Any) -> str:
    """A provider key kept in a file of its own (on a swarm: a Swarm secret, /run/secrets/...), so
    it is in no service spec, environment or configuration file; "" without one."""
    if not path:
        return ""
    path = str(path)
    if not path.startswith(KEY_DIR + "/") or ".." in path.split("/"):
        raise ConfigError(f"providers.{name}.key_file: must be a file under {KEY_DIR}")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_KEY + 1)
    except OSError as exc:
        raise ConfigError(f"providers.{name}.key_file: cannot read it ({exc.strerror})") from None
    if len(raw) > MAX_KEY:
        raise ConfigError(f"providers.{name}.key_file: over {MAX_KEY} bytes")
    try:
        return raw.decode().strip()
    except UnicodeDecodeError:
        raise ConfigError(f"providers.{name}.key_file: not UTF-8") from None


def _limit(budget: dict, name: str) -> float | None:
    v = budget.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise ConfigError(f"budget.{name}: must be a non-negative number")
    return v


def _size(cfg: dict, name: str, default: int) -> int:
    v = cfg.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConfigError(f"{name}: must be a positive number of bytes")
    return v


class Budget:
    """Spent calls, tokens and cost, and what the calls in flight hold. A call is refused once a
    limit is reached; a call that finds the spend plus what the calls in flight may still cost at
    or over a limit waits for them to finish (so a burst of streams whose usage comes only at their
    end cannot all go out), then is admitted or refused on what they really spent."""

    def __init__(self, cfg: Any):
        cfg = cfg or {}
        if not isinstance(cfg, dict):
            raise ConfigError("budget: must be an object")
        self.max_calls = _limit(cfg, "max_calls")
        self.max_tokens = _limit(cfg, "max_tokens")
        self.max_cost_usd = _limit(cfg, "max_cost_usd")
        self.calls = 0
        self.tokens = 0
        self.cost = 0.0
        self.held_tokens = 0
        self.held_cost = 0.0
        self.in_flight = 0
        self._changed: asyncio.Event | None = None

    def spent(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens": self.tokens, "cost_usd": round(self.cost, 10)}

    def refusal(self) -> dict[str, Any] | None:
        """Why the next call may not go out (None: it may)."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            why, limit, value = f"({self.calls} calls made)", "max_calls", self.max_calls
        elif self.max_tokens is not None and self.tokens >= self.max_tokens:
            why, limit, value = f"({self.tokens} tokens used)", "max_tokens", self.max_tokens
        elif self.max_cost_usd is not None and self.cost >= self.max_cost_usd:
            why, limit, value = f"(${self.cost:.6f} spent)", "max_cost_usd", self.max_cost_usd
        else:
            return None
        return {"reason": "budget_exceeded", "limit": limit, "value": value, "spent": self.spent(),
                "message": f"svc budget exceeded: {limit} {value} reached {why}"}

    def must_wait(self) -> bool:
        """Calls in flight might reach a limit: wait for them before deciding."""
        if not self.in_flight:
            return False
        return ((self.max_tokens is not None and self.tokens + self.held_tokens >= self.max_tokens)
                or (self.max_cost_usd is not None and self.cost + self.held_cost >= self.max_cost_usd))

    async def admit(self, tokens: int, cost: float) -> dict[str, Any] | None:
        """Admit a call that may use `tokens` costing `cost` (held until `release`), or the refusal."""
        while True:
            refusal = self.refusal()
            if refusal is not None:
                return refusal
            if not self.must_wait():
                break
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        self.calls += 1
        self.in_flight += 1
        self.held_tokens += tokens
        self.held_cost += cost
        return None

    def release(self, tokens: int, cost: float) -> None:
        self.in_flight -= 1
        self.held_tokens -= tokens
        self.held_cost -= cost
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def add(self, usage: dict[str, Any] | None, cost: float | None) -> None:
        if usage:
            self.tokens += (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0)
        self.cost += cost or 0.0


TRUNCATED_KEEP = ("seq", "provider", "method", "path", "request_hash", "occurrence", "request_bytes", "status",
                  "content_type", "stream", "started", "latency_ms", "ttft_ms", "model", "usage", "usage_estimated",
                  "cost_usd", "priced_as", "refused", "replayed", "replay_of")


def truncated(rec: dict[str, Any]) -> dict[str, Any]:
    """A record line cut to its metadata (no request, answer or tool arguments): `truncated: true`."""
    small = {k: rec.get(k) for k in TRUNCATED_KEEP if k in rec}
    error = rec.get("error")
    if isinstance(error, dict):
        small["error"] = {"type": str(error.get("type"))[:200], "message": str(error.get("message") or "")[:500]}
    small["tool_calls"] = [{"id": str(t.get("id"))[:200], "name": str(t.get("name"))[:200], "arguments": None}
                           for t in (rec.get("tool_calls") or [])[:50] if isinstance(t, dict)]
    if isinstance(small.get("refused"), dict):
        small["refused"] = {k: v for k, v in small["refused"].items() if k != "detail"} | (
            {"detail": str(small["refused"]["detail"])[:500]} if "detail" in small["refused"] else {})
    small["truncated"] = True
    return small


class Recorder:
    """Appends record lines; once the file holds `limit` bytes, each further line is written cut to
    its metadata (`truncated()`), so a run's recording stays bounded whatever its agent sends."""

    def __init__(self, path: str | None, secrets: list[str], limit: int = MAX_RECORDING):
        self.secrets = secrets
        self.limit = limit
        self.written = 0
        self.fd: int | None = None
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self.written = os.fstat(self.fd).st_size

    def line(self, rec: dict[str, Any]) -> bytes:
        line = json.dumps(rec, separators=(",", ":"))
        for secret in self.secrets:  # also a key in the request or an error message
            line = line.replace(secret, REDACTED)
        return (line + "\n").encode("utf-8", "surrogatepass")

    def write(self, rec: dict[str, Any]) -> None:
        data = self.line(rec)
        if self.written + len(data) > self.limit and not rec.get("truncated"):
            data = self.line(truncated(rec))
        if self.fd is not None:
            os.write(self.fd, data)  # one write to an O_APPEND fd: whole lines
            self.written += len(data)


class Recording:
    """The calls of a recorded run, for replay."""

    def __init__(self, path: str):
        self.calls: list[dict[str, Any]] = []
        self.answers: dict[tuple[str, int], dict[str, Any]] = {}
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                lines = fh.read().splitlines()
        except OSError as exc:
            raise ConfigError(f"replay_file: cannot read it ({exc.strerror})") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                raise ConfigError(f"replay_file line {n}: not JSON") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
                raise ConfigError(f"replay_file line {n}: not a gateway record (no seq)")
            if rec.get("open"):  # the admission line of a call, not its record
                continue
            self.calls.append(rec)
            # A budget or divergence refusal is decided again in the replay; any other answer is replayed.
            refused = (rec.get("refused") or {}).get("reason")
            if refused not in ("budget_exceeded", "replay_diverged") and isinstance(rec.get("status"), int) \
                    and rec.get("request_hash") and not rec.get("truncated"):
                self.answers.setdefault((rec["request_hash"], int(rec.get("occurrence") or 1)), rec)
        self.calls.sort(key=lambda r: r["seq"])
        self.by_seq = {r["seq"]: r for r in self.calls}

    def divergence(self, seq: int, provider: str, method: str, path: str, request: Any, digest: str,
                   occurrence: int) -> str:
        """Which part of call `seq` the recording does not hold."""
        same = [r for r in self.calls if (r.get("provider"), r.get("method"), r.get("path")) == (provider, method, path)]
        here = self.by_seq.get(seq)
        if here is not None and here in same:
            other = here
        elif same:
            other = min(same, key=lambda r: (abs(r["seq"] - seq), r["seq"]))
        elif not self.calls or seq > self.calls[-1]["seq"]:
            return f"no recorded call #{seq} (the recording has {len(self.calls)})"
        else:
            return (f"no recorded {method} {path} call to {provider} (call #{seq} of the recording is "
                    f"{here.get('method')} {here.get('path')} to {here.get('provider')})" if here else
                    f"no recorded {method} {path} call to {provider}")
        if other.get("truncated") and other.get("request_hash") == digest:
            return (f"recorded call #{other['seq']} was cut to its metadata (the run's recording reached its size "
                    "cap), so its answer cannot be replayed")
        diff = json_diff(request, other.get("request"))
        if diff is None:
            made = sum(1 for r in self.calls if r.get("request_hash") == digest)
            return (f"the same request as recorded call #{other['seq']}, made {occurrence} times "
                    f"(the recording has it {made} times)")
        return f"{diff} (recorded call #{other['seq']})"


class Upstream:
    __slots__ = ("reader", "writer", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.reused = False

    def close(self) -> None:
        try:
            self.writer.close()
        except (OSError, RuntimeError):
            pass


# --- the gateway -------------------------------------------------------------------------------


class Gateway:
    def __init__(self, cfg: dict[str, Any]):
        if not isinstance(cfg, dict):
            raise ConfigError("the configuration must be a JSON object")
        self.token = cfg.get("token")
        if not isinstance(self.token, str) or not self.token:
            raise ConfigError("token: missing")
        self.mode = str(cfg.get("mode") or "live")
        if self.mode not in ("live", "replay"):
            raise ConfigError("mode: must be live or replay")
        providers = cfg.get("providers") or {}
        if not isinstance(providers, dict):
            raise ConfigError("providers: must be an object")
        self.providers = {name: Provider(name, p, need_key=self.mode == "live") for name, p in providers.items()}
        self.recording = None
        if self.mode == "replay":
            if not cfg.get("replay_file"):
                raise ConfigError("replay_file: required in replay mode")
            self.recording = Recording(str(cfg["replay_file"]))
        keys = sorted({p.key for p in self.providers.values() if len(p.key) >= MIN_SECRET}, key=len, reverse=True)
        self.secrets = [k.encode() for k in keys]
        _LOG_SECRETS[:] = [p.key for p in self.providers.values() if p.key]
        self.max_body = _size(cfg, "max_body", MAX_BODY)
        try:
            self.recorder = Recorder(cfg.get("record_file"), keys, _size(cfg, "max_recording", MAX_RECORDING))
        except OSError as exc:
            raise ConfigError(f"record_file: cannot open it for appending ({exc.strerror})") from None
        self.budget = Budget(cfg.get("budget"))
        aliases = cfg.get("pricing_aliases") or {}
        if not isinstance(aliases, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()):
            raise ConfigError("pricing_aliases: must map model names to pricing table keys")
        self.aliases = {normalise_model(k): v for k, v in aliases.items()}
        pricing = cfg.get("pricing") or {}
        if not isinstance(pricing, dict) or not all(
                isinstance(v, (list, tuple)) and len(v) >= 2 and all(isinstance(x, (int, float)) for x in v[:2])
                for v in pricing.values()):
            raise ConfigError("pricing: must map model names to [input, output, cached_input] USD per 1M tokens")
        self.pricing = pricing
        self.policy = Policy(allow_private=bool(cfg.get("allow_private")),
                             host_addresses=[str(a) for a in cfg.get("host_addresses") or []])
        self.pool: dict[str, list[Upstream]] = {}
        self.seq = 0
        self.occurrences: dict[str, int] = {}
        self._dns: dict[tuple[str, int], tuple[float, list]] = {}
        self._ssl: ssl.SSLContext | None = None

    # -- the agent side --

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self.one_request(reader, writer):
                pass
        except BadRequest as exc:
            await self.send_error(writer, exc.status, "openai", str(exc), "bad_request", keep=False)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # shutting down: an open keep-alive connection is simply closed
        except Exception as exc:  # one broken connection never stops the gateway
            log(f"connection error: {type(exc).__name__}: {exc}")
        finally:
            try:
                writer.close()
            except (OSError, RuntimeError):
                pass

    async def one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            async with asyncio.timeout(CLIENT_IDLE):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            raise BadRequest(431, f"the request head is over {MAX_HEAD} bytes") from None
        lines = head[:-4].split(b"\r\n")
        while lines and not lines[0]:
            lines.pop(0)
        parts = lines[0].decode("latin-1").split(" ") if lines else []
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(400, "malformed request line")
        method, target, version = parts
        method = method.upper()
        try:
            headers = parse_headers(lines[1:])
        except ValueError as exc:
            raise BadRequest(400, str(exc)) from None
        keep = "close" not in tokens(headers, "connection") and version == "HTTP/1.1"

        if method == "CONNECT":
            await self.send_error(writer, 405, "openai", "CONNECT refused: the model gateway is not a proxy",
                                  "method_refused", keep=False)
            return False
        if not target.startswith("/"):
            await self.send_error(writer, 400, "openai", "absolute-form request target refused: the gateway forwards "
                                  "only to its configured providers", "path_refused", keep=False)
            return False
        too_large: TooLarge | None = None
        try:
            body = await self.read_body(reader, writer, headers)
        except TooLarge as exc:
            body, too_large = b"", exc
            keep = keep and exc.drained  # an undrained body leaves the connection unusable
        path, _, query = target.partition("?")
        if path == "/__svc/health":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
                         + (b"\r\n" if keep else b"Connection: close\r\n\r\n") + b"ok\n")
            await writer.drain()
            return keep
        name, _, rest = path[1:].partition("/")
        shape = "anthropic" if name == "anthropic" else "openai"
        if not self.authorized(headers):
            await self.send_error(writer, 401, shape, "svc gateway: missing or wrong token (use the API key this "
                                  "sandbox's environment gives you)", "invalid_api_key", keep=keep)
            return keep
        why = path_refusal(target)
        if why:
            log(f"refused {method} request: its path has {why}")
            await self.send_error(writer, 400, shape, f"svc gateway: path refused: it has {why}", "path_refused",
                                  keep=keep)
            return keep
        provider = self.providers.get(name)
        if provider is None:
            configured = ", ".join(f"/{p}/" for p in self.providers) or "none"
            await self.send_error(writer, 404, shape, f"svc gateway: provider {name!r} is not configured for this "
                                  f"sandbox (models.providers; configured: {configured})", "provider_not_configured",
                                  keep=keep)
            return keep
        rec_path = "/" + rest + ("?" + query if query else "")
        if too_large is not None:
            await self.refuse_too_large(writer, provider, method, rec_path, too_large, keep)
            return keep
        up_path = provider.prefix + rec_path
        return await self.call(writer, provider, method, rec_path, up_path, headers, body, keep)

    async def read_body(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        headers: list[tuple[str, str]]) -> bytes:
        """The request body; TooLarge past `max_body` (read and dropped up to DISCARD_MAX, so the
        agent's client, still sending, gets the 413; never held in memory)."""
        chunked = "chunked" in tokens(headers, "transfer-encoding")
        length = header(headers, "content-length")
        if not chunked and length is None:
            return b""
        if not chunked:
            try:
                n = int(length.split(",")[0].strip())  # type: ignore[union-attr]
            except ValueError:
                raise BadRequest(400, "bad Content-Length") from None
            if n < 0:
                raise BadRequest(400, "bad Content-Length")
            if n > self.max_body:
                if n > DISCARD_MAX:
                    raise TooLarge(n, drained=False)
                if "100-continue" in tokens(headers, "expect"):
                    raise TooLarge(n, drained=False)  # never sent: the 413 is its answer
                await discard(reader, n)
                raise TooLarge(n, drained=True)
            if "100-continue" in tokens(headers, "expect"):
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return await reader.readexactly(n)
        if "100-continue" in tokens(headers, "expect"):
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        parts: list[bytes] = []
        total = 0
        while True:
            line = await reader.readline()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BadRequest(400, "bad chunk size") from None
            if size == 0:
                while (await reader.readline()).strip():
                    pass
                if total > self.max_body:
                    raise TooLarge(total, drained=True)
                return b"".join(parts)
            total += size
            if total > DISCARD_MAX:
                raise TooLarge(total, drained=False)
            if total > self.max_body:
                parts.clear()
                await discard(reader, size)
            else:
                parts.append(await reader.readexactly(size))
            await reader.readexactly(2)

    async def refuse_too_large(self, writer: asyncio.StreamWriter, provider: Provider, method: str, rec_path: str,
                               exc: TooLarge, keep: bool) -> None:
        """A 413 in the provider's shape, recorded as metadata only (the body was never kept)."""
        t0 = time.perf_counter()
        rec = self.new_record(provider, method, rec_path)
        rec["request_bytes"] = exc.size
        message = (f"svc gateway: the request body ({exc.size} bytes{'' if exc.drained else ' or more'}) is over this "
                   f"sandbox's limit of {self.max_body} bytes (SERVICE_GATEWAY_MAX_BODY); send less context")
        sent = await self.send_error(writer, 413, provider.name, message, "request_too_large", keep=keep)
        rec.update(status=413, content_type="application/json", body=as_text(sent),
                   refused={"reason": "request_too_large", "bytes": exc.size, "limit": self.max_body})
        self.finish(rec, t0)

    def authorized(self, headers: list[tuple[str, str]]) -> bool:
        want = self.token.encode()
        ok = False
        for name, value in headers:
            low = name.lower()
            if low == "authorization":
                scheme, _, credential = value.strip().partition(" ")
                ok |= scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode("latin-1"), want)
            elif low == "x-api-key":
                ok |= hmac.compare_digest(value.strip().encode("latin-1"), want)
        return ok

    async def send_error(self, writer: asyncio.StreamWriter, status: int, shape: str, message: str,
                         code: str | None, keep: bool, retry: bool = False, kind: str | None = None) -> bytes:
        body = error_body(shape, status, message, code, kind)
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nX-Svc-Gateway: refused\r\n"
                + ("" if retry else "x-should-retry: false\r\n")  # the SDKs would retry a 409/429/5xx
                + ("" if keep else "Connection: close\r\n") + "\r\n")
        try:
            writer.write(head.encode() + body)
            await writer.drain()
        except (ConnectionError, RuntimeError):
            pass
        return body

    # -- one call --

    def new_record(self, provider: Provider, method: str, rec_path: str) -> dict[str, Any]:
        self.seq += 1
        return {
            "seq": self.seq, "provider": provider.name, "method": method, "path": rec_path, "request_hash": None,
            "occurrence": None, "request": None, "request_bytes": 0, "status": None, "content_type": None,
            "stream": False, "started": time.time(), "latency_ms": None, "model": None, "usage": None,
            "cost_usd": None, "tool_calls": [], "error": None, "refused": None, "replayed": False}

    def hold(self, request: Any, body: bytes) -> tuple[int, float]:
        """What a call may spend, held against the budget while it is in flight: its prompt (a token
        per CHARS_PER_TOKEN bytes) and its max_tokens (else OUTPUT_RESERVE), priced."""
        output = OUTPUT_RESERVE
        model = None
        if isinstance(request, dict):
            for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
                v = as_int(request.get(name))
                if v is not None and v > 0:
                    output = v
                    break
            model = request.get("model") if isinstance(request.get("model"), str) else None
        usage = {"input_tokens": -(-len(body) // CHARS_PER_TOKEN), "output_tokens": output, "cached_input_tokens": 0}
        cost, _ = cost_of(self.pricing, model, usage, self.aliases)
        return usage["input_tokens"] + output, cost or 0.0

    async def call(self, writer: asyncio.StreamWriter, provider: Provider, method: str, rec_path: str, up_path: str,
                   headers: list[tuple[str, str]], body: bytes, keep: bool) -> bool:
        t0 = time.perf_counter()
        rec = self.new_record(provider, method, rec_path)
        rec["request_bytes"] = len(body)
        shape = provider.name
        parsed = hash_body(body)
        held = self.hold(parsed[0], body)
        refusal = await self.budget.admit(*held)
        if refusal is None:  # the daemon waits for its end line (or counts the hold) when the agent is done
            try:
                self.recorder.write({"seq": rec["seq"], "open": True, "held_tokens": held[0],
                                     "held_cost_usd": held[1]})
            except OSError as exc:
                log(f"cannot write the call record: {exc.strerror}")
        else:
            self.identify(rec, body, parsed)
            rec["request"] = None  # a refused call is recorded as metadata only
            message = refusal.pop("message")
            sent = await self.send_error(writer, 429, shape, message, "budget_exceeded", keep=keep)
            rec.update(status=429, content_type="application/json", body=as_text(sent), refused=refusal)
            self.finish(rec, t0)
            return keep
        try:
            if self.recording is not None:
                self.identify(rec, body, parsed)
                return await self.replay(writer, rec, shape, keep, t0)
            return await self.forward(writer, provider, method, up_path, headers, body, rec, keep, t0, parsed)
        finally:
            self.identify(rec, body, parsed)
            try:
                self.finish(rec, t0)
            finally:
                self.budget.release(*held)

    def identify(self, rec: dict[str, Any], body: bytes, parsed: tuple[Any, Any] | None = None) -> None:
        """Hash the request and count its occurrence (when live, while the provider works on it:
        a long conversation takes a millisecond or two to hash)."""
        if rec["request_hash"] is not None:
            return
        request, hashed = parsed if parsed is not None else hash_body(body)
        digest = request_hash(rec["provider"], rec["method"], rec["path"], hashed)
        occurrence = self.occurrences[digest] = self.occurrences.get(digest, 0) + 1
        model = request.get("model") if isinstance(request, dict) else None
        rec.update(request_hash=digest, occurrence=occurrence, request=request,
                   model=model if isinstance(model, str) else None)

    def finish(self, rec: dict[str, Any], t0: float) -> None:
        rec["latency_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        status = rec.get("status")
        if isinstance(status, int) and rec.get("refused") is None:
            if rec.get("stream"):
                shown = "".join(text for _, text in rec.get("chunks") or [])
                model, usage, tools, error = analyze_stream(shown + "".join(rec.get("hidden_chunks") or []))
                answer_bytes = len(as_bytes(shown))
            else:
                error = None
                answer_bytes = len(as_bytes(rec.get("body") or ""))
                try:
                    model, usage, tools = analyze_json(json.loads(rec.get("body") or "null"))
                except ValueError:
                    model, usage, tools = None, dict(NO_USAGE), []
            if usage.get("input_tokens") is None and usage.get("output_tokens") is None and status < 400 \
                    and rec.get("method") == "POST":
                usage = estimate_usage(int(rec.get("request_bytes") or 0), answer_bytes)
                rec["usage_estimated"] = True
            rec["model"] = model or rec["model"]
            rec["usage"] = usage
            rec["tool_calls"] = tools
            rec["cost_usd"], priced_as = cost_of(self.pricing, rec["model"], usage, self.aliases)
            if priced_as is not None:
                rec["priced_as"] = priced_as
            if status >= 400 and rec.get("error") is None:
                rec["error"] = upstream_error(status, rec.get("body") or "")
            elif error is not None and rec.get("error") is None:
                rec["error"] = error
            self.budget.add(usage, rec["cost_usd"])
        try:
            self.recorder.write(rec)
        except OSError as exc:
            log(f"cannot write the call record: {exc.strerror}")

    async def forward(self, writer: asyncio.StreamWriter, provider: Provider, method: str, up_path: str,
                      headers: list[tuple[str, str]], body: bytes, rec: dict[str, Any], keep: bool, t0: float,
                      parsed: tuple[Any, Any] | None = None) -> bool:
        parsed = parsed if parsed is not None else hash_body(body)
        hide_usage = wants_stream_usage(provider.name, method, rec["path"], parsed[0])
        upstream_body = body
        if hide_usage:  # its usage comes in one more chunk, kept from the agent (UsageFilter)
            upstream_body = with_stream_usage(parsed[0])
            rec["usage_asked"] = True
        out = [f"{method} {up_path} HTTP/1.1\r\nHost: {provider.host_header}\r\n"]
        dropped = REQUEST_DROP | tokens(headers, "connection")
        for name, value in headers:
            if name.lower() not in dropped:
                out.append(f"{name}: {value}\r\n")
        cred_name, cred_value = provider.credential()
        out.append(f"{cred_name}: {cred_value}\r\nAccept-Encoding: identity\r\n")
        if upstream_body or method in ("POST", "PUT", "PATCH"):
            out.append(f"Content-Length: {len(upstream_body)}\r\n")
        out.append("\r\n")
        request_bytes = "".join(out).encode("latin-1") + upstream_body
        shape = provider.name
        try:
            up, status, reason, resp_headers = await self.exchange(provider, method, request_bytes,
                                                                   lambda: self.identify(rec, body, parsed))
        except UpstreamRefused as exc:
            message = f"svc gateway: {exc}"
            log(message)
            sent = await self.send_error(writer, 403, shape, message, "upstream_refused", keep=keep)
            rec.update(status=403, content_type="application/json", body=as_text(sent),
                       refused={"reason": "private_address", "detail": str(exc)})
            return keep
        except UpstreamFailed as exc:
            message = f"svc gateway: {exc}"
            sent = await self.send_error(writer, 502, shape, message, "upstream_unreachable", keep=keep, retry=True)
            rec.update(status=502, content_type="application/json", body=as_text(sent),
                       error={"type": "upstream_unreachable", "message": str(exc)})
            return keep

        ctype = header(resp_headers, "content-type") or ""
        framing, length = response_framing(method, status, resp_headers)
        reusable = framing != "eof" and "close" not in tokens(resp_headers, "connection")
        stream = ctype.lower().startswith("text/event-stream") and framing != "none"
        rec.update(status=status, content_type=ctype or None, stream=stream)
        dropped = RESPONSE_DROP | tokens(resp_headers, "connection")
        head = [f"HTTP/1.1 {status} {reason}\r\n"]
        for name, value in resp_headers:
            if name.lower() not in dropped:
                if any(s in value.encode("latin-1", "replace") for s in self.secrets):
                    value = REDACTED
                head.append(f"{name}: {value}\r\n")
        if not keep:
            head.append("Connection: close\r\n")

        if not stream:
            try:
                data = b"".join([piece async for piece in body_pieces(up.reader, framing, length)])
            except UpstreamFailed as exc:
                up.close()
                sent = await self.send_error(writer, 502, shape, f"svc gateway: {exc}", "upstream_unreachable",
                                             keep=keep, retry=True)
                rec.update(status=502, content_type="application/json", body=as_text(sent),
                           error={"type": "upstream_unreachable", "message": str(exc)})
                return keep
            self.release(provider, up, reusable)
            cut = Cutter(self.secrets)
            data = cut.redact(data)
            if method == "HEAD":
                cl = header(resp_headers, "content-length")
                if cl is not None:
                    head.append(f"Content-Length: {cl}\r\n")
            elif status not in (204, 304):
                head.append(f"Content-Length: {len(data)}\r\n")
            head.append("\r\n")
            writer.write("".join(head).encode("latin-1") + data)
            await writer.drain()
            rec["body"] = as_text(data)
            return keep

        head.append("Transfer-Encoding: chunked\r\n\r\n")
        writer.write("".join(head).encode("latin-1"))
        chunks: list[list[Any]] = []
        rec["chunks"] = chunks
        cut = Cutter(self.secrets)
        usage_filter = UsageFilter() if hide_usage else None
        try:
            try:
                async for piece in body_pieces(up.reader, framing, length):
                    data = cut.feed(piece)
                    if usage_filter is not None:
                        data = usage_filter.feed(data)
                    if data:
                        await self.emit(writer, rec, chunks, data, t0)
                data = cut.flush()
                if usage_filter is not None:
                    data = usage_filter.feed(data) + usage_filter.flush()
                if data:
                    await self.emit(writer, rec, chunks, data, t0)
            except UpstreamFailed as exc:
                up.close()
                rec["error"] = {"type": "upstream_failed", "message": f"the stream broke: {exc}"}
                return False  # closing without the last chunk tells the agent the answer is cut
            finally:
                if usage_filter is not None and usage_filter.hidden:
                    rec["hidden_chunks"] = usage_filter.hidden
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, RuntimeError):
            up.close()
            rec["error"] = {"type": "client_disconnected", "message": "the agent closed the connection mid-stream"}
            return False
        self.release(provider, up, reusable)
        return keep

    async def emit(self, writer: asyncio.StreamWriter, rec: dict[str, Any], chunks: list, data: bytes,
                   t0: float) -> None:
        offset = round((time.perf_counter() - t0) * 1000, 3)
        if not chunks:
            rec["ttft_ms"] = offset
        chunks.append([offset, as_text(data)])
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()

    async def replay(self, writer: asyncio.StreamWriter, rec: dict[str, Any], shape: str, keep: bool,
                     t0: float) -> bool:
        assert self.recording is not None
        hit = self.recording.answers.get((rec["request_hash"], rec["occurrence"]))
        if hit is None:
            detail = self.recording.divergence(rec["seq"], rec["provider"], rec["method"], rec["path"],
                                               rec["request"], rec["request_hash"], rec["occurrence"])
            message = f"svc replay diverged: call #{rec['seq']} ({rec['method']} {rec['path']}): {detail}"
            sent = await self.send_error(writer, 409, shape, message, "replay_diverged", keep=keep)
            rec.update(status=409, content_type="application/json", body=as_text(sent),
                       refused={"reason": "replay_diverged", "seq": rec["seq"], "detail": detail})
            return keep
        status = int(hit["status"])
        ctype = hit.get("content_type") or "application/json"
        rec.update(status=status, content_type=ctype, stream=bool(hit.get("stream")), replayed=True,
                   replay_of=hit["seq"], error=hit.get("error"))
        if hit.get("hidden_chunks"):
            rec["hidden_chunks"] = hit["hidden_chunks"]
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'OK' if status < 400 else 'Error')}\r\n"
                f"Content-Type: {ctype}\r\nX-Svc-Gateway: replayed\r\n" + ("" if keep else "Connection: close\r\n"))
        if not rec["stream"]:
            data = as_bytes(hit.get("body") or "")
            writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode("latin-1") + data)
            await writer.drain()
            rec["body"] = hit.get("body") or ""
            return keep
        writer.write(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode("latin-1"))
        chunks: list[list[Any]] = []
        rec["chunks"] = chunks
        try:
            for _, text in hit.get("chunks") or []:
                await self.emit(writer, rec, chunks, as_bytes(text), t0)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, RuntimeError):
            rec["error"] = {"type": "client_disconnected", "message": "the agent closed the connection mid-stream"}
            return False
        return keep

    # -- upstream connections --

    async def exchange(self, provider: Provider, method: str, request_bytes: bytes,
                       sent: Any = None) -> tuple[Upstream, int, str, list[tuple[str, str]]]:
        """Send the request (then call `sent()`), read the answer's head: (connection, status, reason, headers)."""
        for attempt in (0, 1):
            up = self.idle(provider) if attempt == 0 else None
            if up is None:
                up = await self.connect(provider)
            try:
                up.writer.write(request_bytes)
                if sent is not None:
                    sent()
                    sent = None
                await up.writer.drain()
                while True:
                    async with asyncio.timeout(UPSTREAM_IDLE):
                        raw = await up.reader.readuntil(b"\r\n\r\n")
                    lines = raw[:-4].split(b"\r\n")
                    status_line = lines[0].decode("latin-1").split(" ", 2)
                    if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
                        raise ValueError(f"malformed status line {lines[0][:80]!r}")
                    status = int(status_line[1])
                    if 100 <= status < 200 and status != 101:
                        continue
                    reason = status_line[2] if len(status_line) > 2 else REASONS.get(status, "")
                    return up, status, reason, parse_headers(lines[1:])
            except asyncio.IncompleteReadError as exc:
                up.close()
                if up.reused and attempt == 0 and not exc.partial:
                    continue  # a kept-alive connection the provider had closed: once more, fresh
                raise UpstreamFailed(f"{provider.authority} closed the connection before answering") from None
            except (ConnectionError, OSError) as exc:
                up.close()
                if up.reused and attempt == 0:
                    continue
                raise UpstreamFailed(f"{provider.authority} failed: {exc}") from None
            except (ValueError, asyncio.LimitOverrunError, TimeoutError) as exc:
                up.close()
                raise UpstreamFailed(f"{provider.authority} sent no valid answer head: {exc or type(exc).__name__}") \
                    from None
        raise UpstreamFailed(f"{provider.authority} failed")

    def idle(self, provider: Provider) -> Upstream | None:
        pool = self.pool.get(provider.name)
        while pool:
            up = pool.pop()
            if up.reader.at_eof() or up.writer.is_closing():
                up.close()
                continue
            up.reused = True
            return up
        return None

    def release(self, provider: Provider, up: Upstream, reusable: bool) -> None:
        pool = self.pool.setdefault(provider.name, [])
        if reusable and len(pool) < POOL_MAX and not up.reader.at_eof():
            pool.append(up)
        else:
            up.close()

    async def resolve(self, host: str, port: int) -> list:
        now = time.monotonic()
        hit = self._dns.get((host, port))
        if hit and hit[0] > now:
            return hit[1]
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        self._dns[(host, port)] = (now + DNS_TTL, infos)
        return infos

    async def connect(self, provider: Provider) -> Upstream:
        try:
            infos = await self.resolve(provider.host, provider.port)
        except OSError as exc:
            raise UpstreamFailed(f"cannot resolve {provider.host}: {exc.strerror or exc}") from None
        allowed, why = self.policy.check_addresses(provider.host, [info[4][0] for info in infos], provider.port)
        if why:
            raise UpstreamRefused(f"upstream {provider.authority} refused: {why} (private upstreams need the "
                                  "operator's allow_private setting)")
        context = None
        if provider.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        last: BaseException | None = None
        for info in infos:
            addr = info[4][0]
            if addr not in allowed:
                continue
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reader, writer = await asyncio.open_connection(
                        addr, provider.port, ssl=context, server_hostname=provider.host if context else None,
                        limit=MAX_HEAD)
                return Upstream(reader, writer)
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                last = exc
        raise UpstreamFailed(f"cannot connect to {provider.authority}: {last or 'no address'}")


def response_framing(method: str, status: int, headers: list[tuple[str, str]]) -> tuple[str, int]:
    """("none" | "chunked" | "length" | "eof", length) of an answer's body."""
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return "none", 0
    if "chunked" in tokens(headers, "transfer-encoding"):
        return "chunked", 0
    cl = header(headers, "content-length")
    if cl is not None:
        try:
            return "length", int(cl.split(",")[0].strip())
        except ValueError:
            raise UpstreamFailed("the provider sent a bad Content-Length") from None
    return "eof", 0


async def body_pieces(reader: asyncio.StreamReader, framing: str, length: int) -> AsyncIterator[bytes]:
    """The answer's body as it arrives (transfer coding removed)."""
    try:
        if framing == "chunked":
            while True:
                async with asyncio.timeout(UPSTREAM_IDLE):
                    line = await reader.readline()
                    if not line:
                        raise UpstreamFailed("closed inside a chunked body")
                    size = int(line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        while (await reader.readline()).strip():
                            pass
                        return
                    data = await reader.readexactly(size + 2)
                yield data[:-2]
        elif framing == "length":
            while length > 0:
                async with asyncio.timeout(UPSTREAM_IDLE):
                    data = await reader.read(min(READ_PIECE, length))
                if not data:
                    raise UpstreamFailed(f"closed with {length} body bytes missing")
                length -= len(data)
                yield data
        elif framing == "eof":
            while True:
                async with asyncio.timeout(UPSTREAM_IDLE):
                    data = await reader.read(READ_PIECE)
                if not data:
                    return
                yield data
    except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
        raise UpstreamFailed(f"reading the answer failed: {type(exc).__name__}") from None


# --- main ----------------------------------------------------------------------------------------


def load_config() -> dict[str, Any]:
    path = os.environ.get("SVC_GATEWAY_CONFIG_FILE")
    if not path:
        raise ConfigError("SVC_GATEWAY_CONFIG_FILE is not set")
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # the message names a position, never the content
        raise ConfigError(f"{path} is not JSON: {exc}") from None


async def serve(cfg: dict[str, Any]) -> None:
    gateway = Gateway(cfg)
    host, _, port = str(cfg.get("listen") or "0.0.0.0:8480").rpartition(":")
    server = await asyncio.start_server(gateway.handle, host or "0.0.0.0", int(port), limit=MAX_HEAD, backlog=1024)
    bound = server.sockets[0].getsockname()
    limits = {k: v for k, v in (("max_calls", gateway.budget.max_calls), ("max_tokens", gateway.budget.max_tokens),
                                ("max_cost_usd", gateway.budget.max_cost_usd)) if v is not None}
    log(f"listening on {bound[0]}:{bound[1]} (mode {gateway.mode}, providers "
        f"{', '.join(gateway.providers) or 'none'}, budget {limits or 'none'}, "
        f"allow_private={gateway.policy.allow_private})")
    await serve_until_stopped(server)


async def serve_until_stopped(server: asyncio.Server) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


async def serve_when_configured(listen: str) -> None:
    """The warm pool's way: listen at once, before any run, and serve once the configuration file
    appears (the daemon renames it into place when a run claims the sandbox); a connection made
    before that waits for it. `ready_file` (in the configuration) is created once it is applied."""
    configured = asyncio.Event()
    current: dict[str, Gateway] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await configured.wait()
        await current["gateway"].handle(reader, writer)

    host, _, port = listen.rpartition(":")
    server = await asyncio.start_server(handle, host or "0.0.0.0", int(port), limit=MAX_HEAD, backlog=1024)
    path = os.environ.get("SVC_GATEWAY_CONFIG_FILE") or ""
    while not os.path.exists(path):
        await asyncio.sleep(0.002)
    cfg = load_config()
    gateway = current["gateway"] = Gateway(cfg)
    configured.set()
    if cfg.get("ready_file"):
        with open(cfg["ready_file"], "w"):
            pass
    log(f"configured (mode {gateway.mode}, providers {', '.join(gateway.providers) or 'none'})")
    await serve_until_stopped(server)


def main() -> None:
    try:
        listen = os.environ.get("SVC_GATEWAY_LISTEN")
        asyncio.run(serve_when_configured(listen) if listen else serve(load_config()))
    except ConfigError as exc:
        log(f"bad configuration: {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
