"""A minimal PostgreSQL wire client (standard library only) for tests: startup, SSL refusal,
SCRAM-SHA-256 / cleartext / trust authentication, and *pipelined* extended-protocol batches
(several Parse/Bind/Execute before one Sync), which libpq clients such as psql and pgbench do not
send. Run it inside a container as a script (`python3 pgwire.py HOST PORT USER PASSWORD DB`) with a
JSON list of batches on stdin: each batch is a list of [sql, [params]]; the script prints one
JSON line per batch with the CommandComplete tags and errors seen."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import struct
import sys


def _msg(t: bytes, body: bytes) -> bytes:
    return t + struct.pack("!I", len(body) + 4) + body


def _cstr(s: str) -> bytes:
    return s.encode() + b"\0"


class Conn:
    def __init__(self, host: str, port: int, user: str, password: str, db: str):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.buf = b""
        self.sock.sendall(struct.pack("!II", 8, 80877103))  # SSLRequest first, like libpq's sslmode=prefer
        assert self.sock.recv(1) == b"N"
        params = _cstr("user") + _cstr(user) + _cstr("database") + _cstr(db) + b"\0"
        body = struct.pack("!I", 196608) + params
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)
        self._auth(user, password)
        while True:
            t, body = self.read()
            if t == b"Z":
                break
            if t == b"E":
                raise RuntimeError(body)

    def read(self) -> tuple[bytes, bytes]:
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack("!I", self.buf[1:5])[0]:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed")
            self.buf += data
        n = struct.unpack("!I", self.buf[1:5])[0]
        t, body, self.buf = self.buf[:1], self.buf[5:1 + n], self.buf[1 + n:]
        return t, body

    def _auth(self, user: str, password: str) -> None:
        t, body = self.read()
        if t == b"E":
            raise RuntimeError(body)
        code = struct.unpack("!I", body[:4])[0]
        if code == 0:
            return
        if code == 3:  # cleartext
            self.sock.sendall(_msg(b"p", _cstr(password)))
        elif code == 10:  # SASL
            nonce = base64.b64encode(os.urandom(18)).decode()
            first_bare = f"n=,r={nonce}"
            first = ("n,," + first_bare).encode()
            self.sock.sendall(_msg(b"p", _cstr("SCRAM-SHA-256") + struct.pack("!I", len(first)) + first))
            t, body = self.read()
            server_first = body[4:].decode()
            attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
            salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
            client_key = hmac.new(salted, b"Client Key", "sha256").digest()
            stored_key = hashlib.sha256(client_key).digest()
            without_proof = f"c=biws,r={attrs['r']}"
            auth_message = f"{first_bare},{server_first},{without_proof}".encode()
            sig = hmac.new(stored_key, auth_message, "sha256").digest()
            proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
            self.sock.sendall(_msg(b"p", f"{without_proof},p={proof}".encode()))
            t, body = self.read()  # SASLFinal
            if t == b"E":
                raise RuntimeError(body)
        else:
            raise RuntimeError(f"unsupported auth {code}")
        t, body = self.read()
        if t == b"E" or struct.unpack("!I", body[:4])[0] != 0:
            raise RuntimeError(body)

    def pipeline(self, statements: list[tuple[str, list]], name: str = "") -> dict:
        """All statements as Parse/Bind/Describe/Execute in one write, then one Sync."""
        out = b""
        for sql, params in statements:
            out += _msg(b"P", _cstr(name) + _cstr(sql) + struct.pack("!H", 0))
            bind = _cstr("") + _cstr(name) + struct.pack("!H", 0) + struct.pack("!H", len(params))
            for p in params:
                value = str(p).encode()
                bind += struct.pack("!I", len(value)) + value
            bind += struct.pack("!H", 0)
            out += _msg(b"B", bind) + _msg(b"D", b"P\0") + _msg(b"E", b"\0" + struct.pack("!I", 0))
        self.sock.sendall(out + _msg(b"S", b""))
        tags, errors = [], []
        while True:
            t, body = self.read()
            if t == b"C":
                tags.append(body[:-1].decode())
            elif t == b"E":
                fields = dict((f[:1].decode(), f[1:].decode()) for f in body.split(b"\0") if f)
                errors.append(fields.get("M"))
            elif t == b"Z":
                return {"tags": tags, "errors": errors, "status": body.decode()}

    def close(self) -> None:
        self.sock.sendall(_msg(b"X", b""))
        self.sock.close()


if __name__ == "__main__":
    host, port, user, password, db = sys.argv[1:6]
    conn = Conn(host, int(port), user, password, db)
    for batch in json.load(sys.stdin):
        print(json.dumps(conn.pipeline([(sql, params) for sql, params in batch])), flush=True)
    conn.close()
