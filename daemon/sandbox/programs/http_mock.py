"""svc's mock HTTP server: a backing service of type `http_mock`. Standard library only; it runs
with the stock python image's `python3`.

Configuration: the JSON in env `SVC_MOCK_CONFIG`:

    {"port": 80, "record": true, "record_file": "/svc-mock/requests.jsonl",
     "routes": [{"method": "GET", "path": "/users/*", "response": {"status": 200, "headers": {}, "body": ...}}]}

Routes match in order: `method` exactly (or `*`), `path` exactly or as a glob (`fnmatch`, so `*`
matches within and across segments). A string body is sent as is (content type text/plain unless
a header says otherwise); any other body is sent as JSON. An unmatched request gets 404 with a JSON
body naming the method and path, so a test failure says what the agent called.

With `record: true` every request (matched or not) is appended to `record_file` as one JSON line
`{method, path, query, headers, body, ts, status}`; the daemon reads that file (it is bind-mounted
from the host). `GET /__svc/requests` answers the same list as a JSON array and
`GET /__svc/health` answers 200 (neither is recorded).
"""
from __future__ import annotations

import fnmatch
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 1024 * 1024
MAX_RECORDED_BODY = 64 * 1024

CONFIG = json.loads(os.environ.get("SVC_MOCK_CONFIG") or "{}")
ROUTES = CONFIG.get("routes") or []
RECORD = bool(CONFIG.get("record"))
RECORD_FILE = CONFIG.get("record_file") or "/tmp/svc-mock-requests.jsonl"
# What the record may hold on the host (its directory is a host directory): past it one marker
# line, and no more. svcd reads at most this much (sandbox/commands.py MOCK_RECORD_CAP).
MAX_RECORD_BYTES = int(CONFIG.get("record_cap") or 16 * 1024 * 1024)
LOCK = threading.Lock()
RECORDED: list[dict] = []
RECORD_STATE = {"bytes": 0, "full": False}


def iso_now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def find_route(method: str, path: str) -> dict | None:
    for route in ROUTES:
        want = str(route.get("method") or "GET").upper()
        if want not in ("*", method):
            continue
        pattern = route.get("path") or "/"
        if pattern == path or ("*" in pattern or "?" in pattern or "[" in pattern) and fnmatch.fnmatchcase(path, pattern):
            return route
    return None


class Handler(BaseHTTPRequestHandler):
    server_version = "svc-http-mock/1"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no delayed-ACK stall

    def log_message(self, fmt: str, *args) -> None:  # access log on stderr, one line per request
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def _handle(self) -> None:
        split = urlsplit(self.path)
        path = split.path or "/"
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, MAX_BODY)) if length else b""
        if path == "/__svc/requests" and self.command == "GET":
            with LOCK:
                payload = json.dumps(RECORDED).encode()
            return self._send(200, {"Content-Type": "application/json"}, payload)
        if path == "/__svc/health":
            return self._send(200, {"Content-Type": "text/plain"}, b"ok\n")
        route = find_route(self.command, path)
        if route is None:
            status = 404
            headers = {"Content-Type": "application/json"}
            payload = json.dumps({"error": "no mock route", "method": self.command, "path": path}).encode()
        else:
            response = route.get("response") or {}
            status = int(response.get("status", 200))
            headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
            raw = response.get("body", "")
            if isinstance(raw, str):
                payload = raw.encode()
                headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            else:
                payload = json.dumps(raw).encode()
                headers.setdefault("Content-Type", "application/json")
        if RECORD:
            entry = {
                "method": self.command,
                "path": path,
                "query": {k: v if len(v) > 1 else v[0] for k, v in parse_qs(split.query, keep_blank_values=True).items()},
                "headers": {k: v for k, v in self.headers.items()},
                "body": body[:MAX_RECORDED_BODY].decode("utf-8", "replace"),
                "ts": iso_now(),
                "status": status,
            }
            line = json.dumps(entry) + "\n"
            with LOCK:
                if not RECORD_STATE["full"]:
                    if RECORD_STATE["bytes"] + len(line) + 200 > MAX_RECORD_BYTES:
                        RECORD_STATE["full"] = True
                        line = json.dumps({"svc_record_full": MAX_RECORD_BYTES}) + "\n"
                    else:
                        RECORDED.append(entry)
                    RECORD_STATE["bytes"] += len(line)
                    with open(RECORD_FILE, "a") as fh:
                        fh.write(line)
        self._send(status, headers, payload)

    def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size = int(self.rfile.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body[:MAX_BODY])
            chunk = self.rfile.read(size)
            self.rfile.readline(65537)
            if len(body) < MAX_BODY:
                body += chunk

    def _send(self, status: int, headers: dict, payload: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle


def main() -> None:
    port = int(CONFIG.get("port") or 80)
    if RECORD:
        os.makedirs(os.path.dirname(RECORD_FILE) or ".", exist_ok=True)
        open(RECORD_FILE, "a").close()
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    sys.stderr.write(f"svc http_mock listening on :{port} ({len(ROUTES)} routes, record={RECORD})\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
