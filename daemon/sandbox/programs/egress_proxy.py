"""svc's per-sandbox egress/audit proxy. Standard library only; runs with the stock python image's
`python3` in its own container (DESIGN.md "Sandboxes").

The agent container sits on an `internal` Docker network with no route out; its `HTTP_PROXY` /
`HTTPS_PROXY` point here. This proxy is the only way out, and only when the sandbox's egress
policy allows something is its container also attached to a network with a route out. It speaks

* HTTP/1.1 forward proxying of absolute-URI requests (`GET http://host/path HTTP/1.1`), with
  keep-alive on both sides, chunked and length-delimited bodies, `Expect: 100-continue` and
  `101 Switching Protocols` (tunnelled after the switch);
* `CONNECT host:port` tunnels (HTTPS): the policy is applied to the host, the bytes are spliced
  without being decrypted (method/path/status inside TLS are not visible; the tunnel is recorded
  as one `http_call` with method `CONNECT` when it closes);
* origin-form requests (`GET /x` with a `Host` header) are proxied the same way, so a client that
  treats the proxy as the server still gets the policy; `GET /__svc/health` answers 200.

Policy (`Policy.decide`, pure and unit-tested):

1. A host that is one of the sandbox's own services (or a `dns_overrides` name that maps to one)
   is always allowed, private address or not; the service is recorded on the event
   (`details.service`, what `forbidden.http_except` reads).
2. Otherwise `default: allow` allows every host; `default: deny` (the default) allows only hosts
   matching an `allow` entry: an exact name, or a glob (`*.example.com` matches any name under
   example.com, not example.com itself; `*` matches everything). An entry may carry a port
   (`api.example.com:443`, from a snapshot's `auth.egress`), which then restricts it to that port.
   An empty list allows nothing.
3. An allowed outside host is resolved by the proxy, and every resolved address is checked before
   connecting: addresses that are not globally routable (private, loopback, link-local incl. the
   169.254.169.254 metadata address, CGNAT, multicast, reserved...) and the daemon host's own
   addresses (`host_addresses`: docker0, bridge gateways, ..., whatever their range) are refused
   unless `allow_private` is set or the request names the address itself and `allow` lists that
   literal IP (loopback, unspecified and multicast stay refused). The proxy then connects to
   the address it checked (never resolving twice), so DNS rebinding cannot slip a private address
   past the check.
4. Cloud metadata services (`cloud_metadata.py`, the list the daemon's outbound guard reads too:
   169.254.169.254, fd00:ec2::254, 100.100.100.200, 168.63.129.16, metadata.google.internal, ...)
   are refused whatever `allow`, `default` or `allow_private` say: a metadata name before it is
   resolved, a metadata address (also embedded in an IPv6 one) before any connection. Only a
   sandbox service (or a `dns_overrides` name mapped to one) may carry such a name.

Audit: JSON lines `{"ts", "type", "details"}` appended to `audit_file` (a host directory
bind-mounted into this container, tailed by the daemon, which stamps the sandbox id, redacts known
secret values and republishes the event). Types: `http_call` (when `http_calls` is on) with method,
scheme, host, port, path, status, duration_ms, request_bytes/response_bytes (body sizes; for
CONNECT, bytes through the tunnel), request headers and response headers with sensitive ones
redacted, service; `warning` (always) for each refusal with host, port, reason and a message.

Ingress (`network.ingress.allow`): the agent's network is `internal`, where Docker cannot publish
ports, so each allowed port is forwarded by this container: `forwards` entries listen on a port of
the proxy (published by the daemon on 127.0.0.1 only) and splice each connection to `to`.

Configuration: JSON in env `SVC_EGRESS_CONFIG`, or in the file named by `SVC_EGRESS_CONFIG_FILE`:

    {"listen": "0.0.0.0:3128", "default": "deny", "allow": ["api.example.com", "*.example.com"],
     "services": ["db", "mock"], "dns_overrides": {"api.stripe.com": "mock"},
     "allow_private": false, "http_calls": true, "audit_file": "/svc-audit/egress.jsonl",
     "forwards": [{"listen": 20000, "to": "sandbox:8080"}], "host_addresses": ["172.16.0.1"]}
"""
from __future__ import annotations

import fnmatch
import functools
import ipaddress
import json
import os
import re
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit

try:  # run as a script from /svc-programs, where cloud_metadata.py is mounted beside it
    from cloud_metadata import metadata_address, metadata_host
except ImportError:  # imported as part of the daemon package
    from daemon.sandbox.programs.cloud_metadata import metadata_address, metadata_host

# --- redaction -------------------------------------------------------------------------------

SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"})
SENSITIVE_PARTS = ("token", "secret", "key", "password", "passwd", "auth", "session", "credential", "signature")
REDACTED = "[redacted]"


@functools.lru_cache(maxsize=2048)
def is_sensitive(name: str) -> bool:
    low = name.lower()
    return low in SENSITIVE_HEADERS or any(part in low for part in SENSITIVE_PARTS)


def redact_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Header name -> value (repeated headers joined with ", ") with sensitive values replaced."""
    out: dict[str, str] = {}
    for name, value in headers:
        value = REDACTED if is_sensitive(name) else value
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def redact_path(path: str) -> str:
    """`path?query` with the values of sensitive query parameters replaced."""
    base, sep, query = path.partition("?")
    if not sep:
        return path
    try:
        pairs = parse_qsl(query, keep_blank_values=True)
    except ValueError:
        return base + "?" + REDACTED
    if not any(is_sensitive(k) for k, _ in pairs):
        return path
    return base + "?" + urlencode([(k, REDACTED if is_sensitive(k) else v) for k, v in pairs])


# --- policy ----------------------------------------------------------------------------------


def normalize_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def split_host_port(target: str, default_port: int) -> tuple[str, int]:
    """`host:port`, `[v6]:port`, `host` -> (host, port). ValueError on a bad port."""
    target = target.strip()
    if target.startswith("["):
        end = target.find("]")
        if end < 0:
            raise ValueError(f"bad host {target!r}")
        host, rest = target[1:end], target[end + 1:]
        port = int(rest[1:]) if rest.startswith(":") else default_port
    elif target.count(":") == 1:
        host, _, p = target.partition(":")
        port = int(p) if p else default_port
    else:
        host, port = target, default_port
    if not 0 < port < 65536:
        raise ValueError(f"bad port {port}")
    return normalize_host(host), port


def _ip(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address (an IPv4-mapped IPv6 one as IPv4; no zone), None when not an address."""
    try:
        ip = ipaddress.ip_address(str(addr).split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def address_refusal(addr: str) -> str | None:
    """Why an address may not be reached from a sandbox without `allow_private` (None: it may)."""
    try:
        ip = ipaddress.ip_address(addr.split("%", 1)[0])
    except ValueError:
        return f"unparseable address {addr}"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_unspecified:
        return f"{ip} is unspecified"
    if ip.is_private:
        return f"{ip} is a private address"
    if not ip.is_global:
        return f"{ip} is not a globally routable address"
    return None


def connected_subnets(route_file: str = "/proc/net/route") -> list:
    """The IPv4 subnets this container is directly attached to (routes without a gateway)."""
    nets = []
    try:
        with open(route_file) as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        return nets
    for line in lines:
        f = line.split()
        if len(f) < 8:
            continue
        try:
            dest, gateway, mask = int(f[1], 16), int(f[2], 16), int(f[7], 16)
        except ValueError:
            continue
        if gateway != 0 or mask == 0:
            continue
        net = ipaddress.IPv4Network((socket.ntohl(dest), bin(mask).count("1")), strict=False)
        nets.append(net)
    return nets


@dataclass
class Decision:
    allowed: bool
    service: str | None = None  # the sandbox service the host names, if any
    reason: str | None = None  # machine-readable refusal reason
    message: str | None = None


@dataclass
class Policy:
    default: str = "deny"
    allow: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    dns_overrides: dict[str, str] = field(default_factory=dict)
    allow_private: bool = False
    host_addresses: list[str] = field(default_factory=list)  # the daemon host's own addresses
    service_subnets: list = field(default_factory=list)  # the networks a service's address may be in

    def __post_init__(self) -> None:
        self._hosts = {ip for ip in map(_ip, self.host_addresses) if ip is not None}
        self._services = {normalize_host(s): s for s in self.services}
        self._overrides = {normalize_host(k): v for k, v in self.dns_overrides.items()}
        self._rules: list[tuple[str, int | None]] = []
        for entry in self.allow:
            entry = entry.strip().lower()
            if not entry:
                continue
            pattern, port = entry, None
            m = re.fullmatch(r"(.+):(\d+)", entry)
            if m and not entry.startswith("[") and _ip(entry) is None:  # a bare IPv6 literal has no port
                pattern, port = m.group(1), int(m.group(2))
            elif m and entry.startswith("[") and m.group(1).endswith("]"):  # [v6]:port
                pattern, port = m.group(1), int(m.group(2))
            self._rules.append((normalize_host(pattern), port))

    @classmethod
    def from_config(cls, cfg: dict) -> "Policy":
        return cls(default=str(cfg.get("default") or "deny"), allow=list(cfg.get("allow") or []),
                   services=list(cfg.get("services") or []), dns_overrides=dict(cfg.get("dns_overrides") or {}),
                   allow_private=bool(cfg.get("allow_private")), host_addresses=list(cfg.get("host_addresses") or []),
                   service_subnets=[ipaddress.ip_network(n, strict=False) for n in cfg.get("service_subnets") or []]
                   or connected_subnets())

    def service_for(self, host: str) -> str | None:
        host = normalize_host(host)
        if host in self._services:
            return self._services[host]
        target = self._overrides.get(host)
        if target is not None:
            return self._services.get(normalize_host(target), target)
        return None

    def matches_allow(self, host: str, port: int) -> bool:
        host = normalize_host(host)
        for pattern, want_port in self._rules:
            if want_port is not None and want_port != port:
                continue
            if pattern == "*" or pattern == host:
                return True
            if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(host, pattern):
                return True
        return False

    def decide(self, host: str, port: int) -> Decision:
        host = normalize_host(host)
        if not host:
            return Decision(False, reason="bad_request", message="no target host")
        service = self.service_for(host)
        if service is not None:
            return Decision(True, service=service)
        metadata = metadata_host(host)
        if metadata:
            return Decision(False, reason="metadata_address",
                            message=f"egress to {host}:{port} refused: {metadata}; no spec can allow it")
        if self.default == "allow" or self.matches_allow(host, port):
            return Decision(True)
        if not self._rules:
            msg = f"egress to {host}:{port} denied: the sandbox's egress policy allows no outside host"
        else:
            msg = f"egress to {host}:{port} denied: not in network.egress.allow"
        return Decision(False, reason="denied_by_policy", message=msg)

    def literal_allowed(self, host: str, port: int | None) -> bool:
        """`host` is an IP address written as such in `allow` (an explicit permission)."""
        host = normalize_host(host)
        if _ip(host) is None:
            return False
        return any(pattern == host and (want is None or port is None or want == port) for pattern, want in self._rules)

    def address_refusal(self, host: str, addr: str, port: int | None = None) -> str | None:
        """Why `addr` (an address `host` resolved to) may not be connected to (None: it may).
        Beyond `address_refusal`: the daemon host's own addresses, whatever their range. A literal
        IP in `allow` lifts only the private-range refusal for that address: loopback, link-local
        (the 169.254.169.254 metadata service among them), multicast and the host's own addresses
        stay refused whatever a spec says (only the operator's allow_private opens them); cloud
        metadata addresses (`cloud_metadata`) stay refused whatever anyone says."""
        ip = _ip(addr)
        if ip is not None and (ip.is_loopback or ip.is_unspecified or ip.is_multicast or ip.is_link_local):
            return address_refusal(addr)
        metadata = metadata_address(addr)
        if metadata:
            return metadata
        if ip is not None and ip in self._hosts:
            return f"{ip} is an address of the sandbox's host"
        if self.literal_allowed(host, port) and ip == _ip(host):
            return None
        return address_refusal(addr)

    def service_address_refusal(self, addr: str) -> str | None:
        """Why a service name's address may not be connected to: a service is a container on the
        sandbox's own network, so its address is in a subnet this proxy is attached to and is
        neither the host's (a bridge gateway) nor link-local (a name the engine's DNS passed on to
        the outside resolver could answer anything)."""
        ip = _ip(addr)
        if ip is None:
            return f"unparseable address {addr}"
        if ip in self._hosts:
            return f"{ip} is an address of the sandbox's host"
        if ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified:
            return address_refusal(addr)
        metadata = metadata_address(addr)
        if metadata:
            return metadata
        if not any(ip.version == net.version and ip in net for net in self.service_subnets):
            return f"{ip} is outside the sandbox's network"
        return None

    def check_addresses(self, host: str, addrs: list[str], port: int | None = None) -> tuple[list[str], str | None]:
        """The addresses of an allowed outside host that may be connected to, and the refusal
        message when there are none."""
        ok, refused = [], []
        for addr in addrs:
            why = metadata_address(addr) if self.allow_private else self.address_refusal(host, addr, port)
            (refused if why else ok).append(why or addr)
        if ok:
            return ok, None
        return [], f"{host} resolves only to refused addresses ({'; '.join(refused[:3])})"


# --- audit sink ------------------------------------------------------------------------------


def iso_now(t: float | None = None) -> str:
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


AUDIT_CAP_BYTES = 64 * 1024 * 1024


class AuditSink:
    """The audit file (in a host directory): at most `cap` bytes. When the next line would pass
    it, one `audit_full` warning is written instead and `full` is set: from then on the proxy
    refuses every request, so nothing leaves the sandbox unaudited."""

    def __init__(self, path: str | None, cap: int = AUDIT_CAP_BYTES):
        self.path = path
        self.cap = cap
        self.size = 0
        self.full = False
        self.lock = threading.Lock()
        self.fd: int | None = None
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(self, type_: str, details: dict, ts: float | None = None) -> None:
        line = json.dumps({"ts": iso_now(ts), "type": type_, "details": details}, separators=(",", ":"),
                          default=str) + "\n"
        data = line.encode()
        with self.lock:
            if self.full:
                return
            if self.size + len(data) + 512 > self.cap:
                self.full = True
                data = (json.dumps({"ts": iso_now(), "type": "warning", "details": {
                    "kind": "audit_full", "limit_bytes": self.cap,
                    "message": f"the egress audit reached its {self.cap // 1024**2} MiB limit: every later request "
                               "is refused"}}, separators=(",", ":")) + "\n").encode()
            self.size += len(data)
            if self.fd is not None:
                os.write(self.fd, data)  # one write of an O_APPEND fd: lines never interleave
            else:
                sys.stderr.write(data.decode())


# --- the proxy -------------------------------------------------------------------------------

MAX_LINE = 64 * 1024
MAX_HEADERS = 200
CHUNK = 256 * 1024
CONNECT_TIMEOUT = 10.0
IDLE_TIMEOUT = 300.0
DNS_TTL = 30.0
HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "keep-alive"}


class ClientGone(Exception):
    pass


class UpstreamClosedEarly(ConnectionError):
    pass


class Reader:
    """A small buffered reader over a socket: lines for heads, exact byte counts for bodies."""

    __slots__ = ("sock", "buf")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(CHUNK)
        if not data:
            return False
        self.buf += data
        return True

    def readline(self) -> bytes | None:
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[: i + 1])
                del self.buf[: i + 1]
                return line
            if len(self.buf) > MAX_LINE:
                raise ValueError("header line too long")
            if not self._fill():
                if self.buf:
                    line = bytes(self.buf)
                    self.buf.clear()
                    return line
                return None

    def read_head(self) -> list[bytes] | None:
        """The lines of one message head (start line first), None at a clean EOF."""
        lines: list[bytes] = []
        while True:
            line = self.readline()
            if line is None:
                if lines:
                    raise ClientGone("connection closed inside a message head")
                return None
            if line in (b"\r\n", b"\n"):
                if not lines:
                    continue  # tolerate stray CRLF between messages
                return lines
            lines.append(line)
            if len(lines) > MAX_HEADERS:
                raise ValueError("too many header lines")

    def chunks(self, n: int):
        """Yield exactly `n` bytes in pieces."""
        while n > 0:
            if not self.buf and not self._fill():
                raise ClientGone("connection closed inside a body")
            take = min(n, len(self.buf))
            piece = bytes(self.buf[:take])
            del self.buf[:take]
            n -= take
            yield piece

    def until_eof(self):
        if self.buf:
            piece = bytes(self.buf)
            self.buf.clear()
            yield piece
        while True:
            data = self.sock.recv(CHUNK)
            if not data:
                return
            yield data

    def take(self) -> bytes:
        data = bytes(self.buf)
        self.buf.clear()
        return data


def parse_headers(lines: list[bytes]) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    for raw in lines:
        line = raw.decode("latin-1").rstrip("\r\n")
        if line[:1] in (" ", "\t") and headers:  # obsolete folding
            name, value = headers[-1]
            headers[-1] = (name, value + " " + line.strip())
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return headers


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def tokens(headers: list[tuple[str, str]], name: str) -> set[str]:
    name = name.lower()
    out: set[str] = set()
    for k, v in headers:
        if k.lower() == name:
            out.update(t.strip().lower() for t in v.split(",") if t.strip())
    return out


def body_framing(headers: list[tuple[str, str]]) -> tuple[str, int]:
    """("chunked", 0) | ("length", n) | ("none", 0) for a request body."""
    if "chunked" in tokens(headers, "transfer-encoding"):
        return "chunked", 0
    cl = header(headers, "content-length")
    if cl is not None:
        n = int(cl.split(",")[0].strip())
        if n < 0:
            raise ValueError("negative Content-Length")
        return ("length", n) if n else ("none", 0)
    return "none", 0


class Proxy:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.policy = Policy.from_config(cfg)
        self.http_calls = bool(cfg.get("http_calls", True))
        self.audit = AuditSink(cfg.get("audit_file"), int(cfg.get("audit_cap") or AUDIT_CAP_BYTES))
        self._dns: dict[tuple[str, int], tuple[float, list[tuple]]] = {}
        self._dns_lock = threading.Lock()

    # -- resolution and connecting --

    def resolve(self, host: str, port: int) -> list[tuple]:
        now = time.monotonic()
        key = (host, port)
        with self._dns_lock:
            hit = self._dns.get(key)
            if hit and hit[0] > now:
                return hit[1]
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        with self._dns_lock:
            self._dns[key] = (now + DNS_TTL, infos)
        return infos

    def open_upstream(self, host: str, port: int, decision: Decision) -> tuple[socket.socket | None, str | None, str | None]:
        """(socket, None, None) or (None, reason, message)."""
        target = host
        if decision.service is not None:
            target = decision.service  # a dns_overrides name: reach the service by its own name
        try:
            infos = self.resolve(target, port)
        except OSError as exc:
            return None, "resolve_failed", f"cannot resolve {target}: {exc}"
        if decision.service is None:
            allowed, why = self.policy.check_addresses(host, [info[4][0] for info in infos], port)
            if why:
                return None, "private_address", f"egress to {host}:{port} refused: {why}"
            infos = [info for info in infos if info[4][0] in allowed]
        elif not self.policy.allow_private:
            refused = [why for why in (self.policy.service_address_refusal(info[4][0]) for info in infos) if why]
            infos = [info for info in infos if self.policy.service_address_refusal(info[4][0]) is None]
            if not infos:
                return None, "private_address", (f"egress to {host}:{port} refused: service '{decision.service}' "
                                                 f"resolves only to refused addresses ({'; '.join(refused[:3])})")
        last = None
        for family, type_, proto, _, sockaddr in infos:
            sock = socket.socket(family, type_, proto)
            sock.settimeout(CONNECT_TIMEOUT)
            try:
                sock.connect(sockaddr)  # the checked address: no second resolution
            except OSError as exc:
                last = exc
                sock.close()
                continue
            sock.settimeout(IDLE_TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock, None, None
        return None, "connect_failed", f"cannot connect to {host}:{port}: {last}"

    def refuse(self, host: str, port: int, method: str, reason: str, message: str) -> None:
        self.audit.emit("warning", {"kind": "egress_refused", "host": host, "port": port, "method": method,
                                    "reason": reason, "message": message})

    # -- per connection --

    def handle(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.settimeout(IDLE_TIMEOUT)
        conn = _Connection(self, client)
        try:
            conn.run()
        except (ClientGone, ConnectionError, socket.timeout, TimeoutError, BrokenPipeError):
            pass
        except ValueError as exc:
            conn.error(400, f"bad request: {exc}")
        except Exception as exc:  # never kill the server for one connection
            sys.stderr.write(f"egress proxy: connection error: {type(exc).__name__}: {exc}\n")
        finally:
            conn.close_upstream()
            try:
                client.close()
            except OSError:
                pass


class _Connection:
    def __init__(self, proxy: Proxy, client: socket.socket):
        self.proxy = proxy
        self.client = client
        self.reader = Reader(client)
        self.up_key: tuple[str, int] | None = None
        self.up: socket.socket | None = None
        self.up_reader: Reader | None = None

    def close_upstream(self) -> None:
        if self.up is not None:
            try:
                self.up.close()
            except OSError:
                pass
        self.up = self.up_reader = self.up_key = None

    def error(self, status: int, message: str, close: bool = True) -> None:
        body = (json.dumps({"error": "egress_refused" if status == 403 else "proxy_error", "message": message}) + "\n").encode()
        reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 501: "Not Implemented"}.get(status, "Error")
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                f"X-Svc-Proxy: refused\r\n{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n")
        try:
            self.client.sendall(head.encode() + body)
        except OSError:
            pass

    def run(self) -> None:
        while True:
            head = self.reader.read_head()
            if head is None:
                return
            parts = head[0].decode("latin-1").strip().split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                raise ValueError(f"malformed request line {head[0][:80]!r}")
            method, target, version = parts
            headers = parse_headers(head[1:])
            if self.proxy.audit.full and not target.startswith("/__svc/health"):
                self.error(403, "the egress audit is full: no more requests leave this sandbox")
                return
            if method.upper() == "CONNECT":
                self.tunnel(target, headers)
                return
            if not self.forward(method, target, version, headers):
                return

    # -- CONNECT --

    def tunnel(self, target: str, headers: list[tuple[str, str]]) -> None:
        proxy = self.proxy
        try:
            host, port = split_host_port(target, 443)
        except ValueError as exc:
            return self.error(400, f"bad CONNECT target {target!r}: {exc}")
        started = time.time()
        t0 = time.monotonic()
        decision = proxy.policy.decide(host, port)
        if not decision.allowed:
            proxy.refuse(host, port, "CONNECT", decision.reason or "denied", decision.message or "denied")
            self.record("CONNECT", "https", host, port, "", 403, t0, started, 0, 0, headers, [], decision, blocked=True)
            return self.error(403, decision.message or "denied")
        up, reason, message = proxy.open_upstream(host, port, decision)
        if up is None:
            if reason == "private_address":
                proxy.refuse(host, port, "CONNECT", reason, message or "")
            self.record("CONNECT", "https", host, port, "", 403 if reason == "private_address" else 502, t0, started,
                        0, 0, headers, [], decision, blocked=reason == "private_address")
            return self.error(403 if reason == "private_address" else 502, message or "refused")
        try:
            self.client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            first = self.read_client_hello()
            sni = server_name(first)
            why = sni_refusal(proxy.policy, host, port, sni)
            if why:
                proxy.refuse(host, port, "CONNECT", "sni_mismatch", why)
                self.record("CONNECT", "https", host, port, "", 403, t0, started, 0, 0, headers, [], decision, blocked=True)
                return
            sent, received = splice(self.client, up, first)
        finally:
            up.close()
        self.record("CONNECT", "https", host, port, "", 200, t0, started, sent, received, headers, [], decision)

    def read_client_hello(self) -> bytes:
        """What the client sent first through the tunnel: its whole TLS ClientHello record when it
        speaks TLS, else its first bytes. A client that sends nothing within CONNECT_TIMEOUT gets
        the tunnel closed: bytes are only passed on once their server name was checked (so a
        protocol where the server speaks first cannot be tunnelled)."""
        data = self.reader.take()
        self.client.settimeout(CONNECT_TIMEOUT)
        try:
            while True:
                if data and data[0] != 0x16:
                    return data  # not TLS: nothing to check
                if len(data) >= 5 and len(data) >= 5 + int.from_bytes(data[3:5], "big"):
                    return data
                if len(data) > 5 + 0x4000:
                    return data
                chunk = self.client.recv(CHUNK)
                if not chunk:
                    return data
                data += chunk
        except (socket.timeout, TimeoutError):
            raise ClientGone("no first bytes through the tunnel") from None
        finally:
            self.client.settimeout(IDLE_TIMEOUT)

    # -- plain HTTP --

    def forward(self, method: str, target: str, version: str, headers: list[tuple[str, str]]) -> bool:
        proxy = self.proxy
        started = time.time()
        t0 = time.monotonic()
        scheme = "http"
        if "://" in target:
            split = urlsplit(target)
            scheme = split.scheme.lower()
            if scheme != "http":
                self.error(501, f"absolute URIs with scheme {scheme!r} are not proxied: use CONNECT for https")
                return False
            try:
                host, port = split_host_port(split.netloc.rpartition("@")[2], 80)
            except ValueError as exc:
                self.error(400, str(exc))
                return False
            path = split.path or "/"
            if split.query:
                path += "?" + split.query
        else:
            path = target
            host_header = header(headers, "host")
            if path.startswith("/__svc/health"):
                self.client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nok\n")
                return True
            if not host_header:
                self.error(400, "request has neither an absolute URI nor a Host header")
                return False
            try:
                host, port = split_host_port(host_header, 80)
            except ValueError as exc:
                self.error(400, str(exc))
                return False

        framing, length = body_framing(headers)
        client_close = "close" in tokens(headers, "connection") or (
            version == "HTTP/1.0" and "keep-alive" not in tokens(headers, "connection"))
        decision = proxy.policy.decide(host, port)
        if not decision.allowed:
            proxy.refuse(host, port, method, decision.reason or "denied", decision.message or "denied")
            self.record(method, scheme, host, port, path, 403, t0, started, 0, 0, headers, [], decision, blocked=True)
            self.error(403, decision.message or "denied")
            return False

        key = (host, port)
        fresh = False
        if self.up is None or self.up_key != key:
            self.close_upstream()
            up, reason, message = proxy.open_upstream(host, port, decision)
            if up is None:
                blocked = reason == "private_address"
                if blocked:
                    proxy.refuse(host, port, method, reason, message or "")
                self.record(method, scheme, host, port, path, 403 if blocked else 502, t0, started, 0, 0, headers, [],
                            decision, blocked=blocked)
                self.error(403 if blocked else 502, message or "refused")
                return False
            self.up, self.up_reader, self.up_key = up, Reader(up), key
            fresh = True

        # The request head as the origin server expects it.
        expect_continue = "100-continue" in tokens(headers, "expect")
        conn_tokens = tokens(headers, "connection")
        out = [f"{method} {path} HTTP/1.1\r\n"]
        for name, value in headers:
            low = name.lower()
            if low in HOP_BY_HOP or low in conn_tokens and low not in ("close",):
                continue
            if low == "expect" and expect_continue:
                continue
            if low in ("connection", "host"):
                continue
            out.append(f"{name}: {value}\r\n")
        # The host the policy checked, never another one the client put in its Host header (RFC 9112
        # 3.2.2: a proxy replaces it with the request target's authority).
        out.append(f"Host: {host if port == 80 else f'{host}:{port}'}\r\n")
        out.append("Connection: close\r\n\r\n" if client_close else "\r\n")
        head_bytes = "".join(out).encode("latin-1")

        if expect_continue and framing != "none":
            self.client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

        for attempt in (0, 1):
            try:
                req_bytes = self.send_request(head_bytes, framing, length)
                status, resp_headers, resp_bytes, keep = self.relay_response(method)
                break
            except ClientGone:
                self.close_upstream()
                raise
            except (ConnectionError, OSError, ValueError) as exc:
                self.close_upstream()
                stale = isinstance(exc, UpstreamClosedEarly) and not fresh and framing == "none"
                if attempt == 0 and stale:
                    # a kept-alive upstream connection the server had closed: retry once, fresh
                    up, reason, message = proxy.open_upstream(host, port, decision)
                    if up is not None:
                        self.up, self.up_reader, self.up_key = up, Reader(up), key
                        fresh = True
                        continue
                self.record(method, scheme, host, port, path, 502, t0, started, 0, 0, headers, [], decision)
                self.error(502, f"upstream {host}:{port} failed: {exc}")
                return False
        self.record(method, scheme, host, port, path, status, t0, started, req_bytes, resp_bytes, headers, resp_headers,
                    decision)
        if status == 101:
            up = self.up
            self.up = None
            try:
                splice(self.client, up, self.reader.take(), self.up_reader.take() if self.up_reader else b"")
            finally:
                up.close()
            return False
        if not keep:
            self.close_upstream()
        return keep and not client_close

    def send_request(self, head: bytes, framing: str, length: int) -> int:
        up = self.up
        assert up is not None
        if framing == "none":
            up.sendall(head)
            return 0
        if framing == "length":
            sent = 0
            first = True
            for piece in self.reader.chunks(length):
                up.sendall(head + piece if first else piece)
                first = False
                sent += len(piece)
            return sent
        # chunked: copy verbatim while following the chunk sizes to find the end
        up.sendall(head)
        total = 0
        while True:
            line = self.reader.readline()
            if line is None:
                raise ClientGone("closed inside a chunked body")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            up.sendall(line)
            if size == 0:
                while True:  # trailers until an empty line
                    trailer = self.reader.readline()
                    if trailer is None:
                        raise ClientGone("closed inside chunk trailers")
                    up.sendall(trailer)
                    if trailer in (b"\r\n", b"\n"):
                        return total
            for piece in self.reader.chunks(size + 2):
                up.sendall(piece)
            total += size

    def relay_response(self, method: str) -> tuple[int, list[tuple[str, str]], int, bool]:
        """Copy one response (after any interim 1xx) to the client: (status, headers, body bytes,
        whether both connections may be kept alive)."""
        ur = self.up_reader
        assert ur is not None
        while True:
            lines = ur.read_head()
            if lines is None:
                raise UpstreamClosedEarly("upstream closed the connection before answering")
            status_line = lines[0].decode("latin-1").strip().split(None, 2)
            if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
                raise ValueError(f"malformed status line {lines[0][:80]!r}")
            status = int(status_line[1])
            resp_headers = parse_headers(lines[1:])
            head = b"".join(lines) + b"\r\n"
            if 100 <= status < 200 and status != 101:
                self.client.sendall(head)
                continue
            break
        up_close = "close" in tokens(resp_headers, "connection") or status_line[0] == "HTTP/1.0" and \
            "keep-alive" not in tokens(resp_headers, "connection")
        if status == 101:
            self.client.sendall(head)
            return status, resp_headers, 0, False
        if method == "HEAD" or status in (204, 304):
            self.client.sendall(head)
            return status, resp_headers, 0, not up_close
        if "chunked" in tokens(resp_headers, "transfer-encoding"):
            total = 0
            self.client.sendall(head)
            pending: list[bytes] = []
            while True:
                line = ur.readline()
                if line is None:
                    raise ConnectionError("upstream closed inside a chunked body")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                pending.append(line)
                if size == 0:
                    while True:
                        trailer = ur.readline()
                        if trailer is None:
                            raise ConnectionError("upstream closed inside chunk trailers")
                        pending.append(trailer)
                        if trailer in (b"\r\n", b"\n"):
                            break
                    self.client.sendall(b"".join(pending))
                    return status, resp_headers, total, not up_close
                pending.extend(ur.chunks(size + 2))
                total += size
                if sum(map(len, pending)) >= CHUNK:
                    self.client.sendall(b"".join(pending))
                    pending.clear()
        cl = header(resp_headers, "content-length")
        if cl is not None:
            n = int(cl.split(",")[0].strip())
            if n <= len(ur.buf):  # the whole body is already here: one send
                body = bytes(ur.buf[:n])
                del ur.buf[:n]
                self.client.sendall(head + body)
                return status, resp_headers, n, not up_close
            self.client.sendall(head)
            for piece in ur.chunks(n):
                self.client.sendall(piece)
            return status, resp_headers, n, not up_close
        # delimited by close
        self.client.sendall(head)
        total = 0
        for piece in ur.until_eof():
            self.client.sendall(piece)
            total += len(piece)
        return status, resp_headers, total, False

    def record(self, method: str, scheme: str, host: str, port: int, path: str, status: int, t0: float,
               started: float, req_bytes: int, resp_bytes: int, headers: list[tuple[str, str]],
               resp_headers: list[tuple[str, str]], decision: Decision, blocked: bool = False) -> None:
        if not self.proxy.http_calls:
            return
        details = {
            "method": method.upper(), "scheme": scheme, "host": host, "port": port, "path": redact_path(path),
            "status": status, "duration_ms": int((time.monotonic() - t0) * 1000),
            "request_bytes": req_bytes, "response_bytes": resp_bytes,
            "headers": redact_headers(headers), "response_headers": redact_headers(resp_headers),
            "service": decision.service,
        }
        if blocked:
            details["blocked"] = True
        self.proxy.audit.emit("http_call", details, ts=started)


def server_name(hello: bytes) -> str | None:
    """The SNI host name of a TLS ClientHello record, None when there is none (or it is not TLS)."""
    try:
        if len(hello) < 5 or hello[0] != 0x16:
            return None
        body = hello[5:5 + int.from_bytes(hello[3:5], "big")]
        if not body or body[0] != 0x01:
            return None
        i = 4 + 2 + 32  # handshake header, version, random
        i += 1 + body[i]  # session id
        i += 2 + int.from_bytes(body[i:i + 2], "big")  # cipher suites
        i += 1 + body[i]  # compression methods
        end = i + 2 + int.from_bytes(body[i:i + 2], "big")
        i += 2
        while i + 4 <= end:
            kind, size = int.from_bytes(body[i:i + 2], "big"), int.from_bytes(body[i + 2:i + 4], "big")
            if kind == 0:  # server_name: list length, then (type 0, length, name)
                j = i + 4 + 2
                if body[j] == 0:
                    n = int.from_bytes(body[j + 1:j + 3], "big")
                    return body[j + 3:j + 3 + n].decode("ascii", "replace")
            i += 4 + size
    except IndexError:
        return None
    return None


def sni_refusal(policy: "Policy", host: str, port: int, sni: str | None) -> str | None:
    """Why a tunnel to `host` that names `sni` in its ClientHello is refused: a tunnel opened to an
    allowed name must not ask the server on the other end for another one (domain fronting)."""
    if sni is None or normalize_host(sni) == normalize_host(host):
        return None
    if _ip(host) is not None and policy.decide(sni, port).allowed:
        return None  # a tunnel to an allowed literal address may name any allowed host
    return (f"egress to {host}:{port} refused: the TLS server name {sni!r} is not the host of the CONNECT "
            "(the policy is checked against both)")


def splice(a: socket.socket, b: socket.socket, a_pending: bytes = b"", b_pending: bytes = b"") -> tuple[int, int]:
    """Copy bytes both ways until both sides are done. Returns (a->b bytes, b->a bytes).
    `a_pending` already came from a (goes to b); `b_pending` from b (goes to a)."""
    a.settimeout(None)
    b.settimeout(None)
    counts = {a: 0, b: 0}
    if a_pending:
        b.sendall(a_pending)
        counts[a] += len(a_pending)
    if b_pending:
        a.sendall(b_pending)
        counts[b] += len(b_pending)
    peer = {a: b, b: a}
    open_ = {a, b}
    while open_:
        ready, _, _ = select.select(list(open_), [], [], IDLE_TIMEOUT)
        if not ready:
            break
        for sock in ready:
            try:
                data = sock.recv(CHUNK)
            except OSError:
                data = b""
            if not data:
                open_.discard(sock)
                try:
                    peer[sock].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            try:
                peer[sock].sendall(data)
            except OSError:
                return counts[a], counts[b]
            counts[sock] += len(data)
    return counts[a], counts[b]


# --- main ------------------------------------------------------------------------------------


def load_config() -> dict:
    path = os.environ.get("SVC_EGRESS_CONFIG_FILE")
    if path:
        with open(path) as fh:
            return json.load(fh)
    return json.loads(os.environ.get("SVC_EGRESS_CONFIG") or "{}")


def forward(listen_port: int, target: str) -> None:
    """Accept on `listen_port` and splice every connection to `target` (host:port)."""
    host, port = split_host_port(target, 80)
    server = socket.create_server(("0.0.0.0", listen_port), backlog=128)

    def one(client: socket.socket) -> None:
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError:
            client.close()
            return
        try:
            splice(client, upstream)
        finally:
            upstream.close()
            client.close()

    while True:
        try:
            client, _ = server.accept()
        except OSError:
            time.sleep(0.05)
            continue
        threading.Thread(target=one, args=(client,), daemon=True).start()


def serve(cfg: dict) -> None:
    for entry in cfg.get("forwards") or []:
        threading.Thread(target=forward, args=(int(entry["listen"]), str(entry["to"])), daemon=True).start()
    proxy = Proxy(cfg)
    host, _, port = str(cfg.get("listen") or "0.0.0.0:3128").rpartition(":")
    server = socket.create_server((host or "0.0.0.0", int(port)), backlog=512, reuse_port=False)
    sys.stderr.write(f"svc egress proxy listening on {host or '0.0.0.0'}:{port} (default {proxy.policy.default}, "
                     f"{len(proxy.policy.allow)} allow rules, {len(proxy.policy.services)} services, "
                     f"allow_private={proxy.policy.allow_private})\n")
    sys.stderr.flush()
    while True:
        try:
            client, _ = server.accept()
        except InterruptedError:
            continue
        except OSError as exc:
            sys.stderr.write(f"egress proxy: accept failed: {exc}\n")
            time.sleep(0.05)
            continue
        threading.Thread(target=proxy.handle, args=(client,), daemon=True).start()


def main() -> None:
    try:
        serve(load_config())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
