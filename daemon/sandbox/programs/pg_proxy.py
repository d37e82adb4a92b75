"""svc's PostgreSQL wire-protocol proxy: audits `db_writes` of one database service. Standard
library only; runs with the stock python image's `python3` in its own container.

The proxy takes the service's name on the sandbox network (so `psql -h db` and
`SERVICE_SERVICE_DB_HOST` reach it) and forwards every byte to the real server unchanged, in both
directions, as soon as it arrives. Beside the byte stream it follows the protocol's message
framing (it never buffers more than one message it is interested in, and skips the rest by
length):

* startup: an `SSLRequest` or `GSSENCRequest` is answered with `N` by the proxy itself (the client
  then continues in clear text, as libpq's default `sslmode=prefer` does); the `StartupMessage`,
  the authentication exchange (any method: trust, md5, SCRAM) and a `CancelRequest` pass through;
* frontend: `Query` (simple protocol; a string holding several statements is split the way the
  server does it, respecting quotes, dollar quotes and comments), `Parse` / `Bind` / `Execute` /
  `Sync` / `Close` (extended protocol, pipelined or not), `FunctionCall`; COPY data passes through;
* backend: `CommandComplete` tags (`INSERT 0 3`, `UPDATE 2`, `DELETE 1`, `MERGE 4`, `COPY 5`,
  `TRUNCATE TABLE`), `ErrorResponse`, `PortalSuspended`, `EmptyQueryResponse` and
  `ReadyForQuery` (with its transaction status).

Each completed write becomes one `db_write` audit event
`{service, table, schema, operation: insert | update | delete, row_count, command, committed,
statement, ts}`: the table comes from the statement (after any `WITH` clause; `schema.table` when
the statement qualifies it, `schema` then repeats the schema), the count from the tag. `COPY ... FROM` counts as insert, `TRUNCATE` as delete (row_count null), `MERGE` as update.
Events are written when the write's transaction ends, with `committed` telling whether it was
committed (explicit COMMIT, or an implicit transaction that ended without error) or rolled back
(ROLLBACK, an error in an implicit transaction, ROLLBACK TO an earlier savepoint, or the connection
closing mid-transaction); autocommit statements are written at once.

Audit lines `{"ts", "type": "db_write", "details"}` are appended to `audit_file` (a host directory
bind-mounted into the container and tailed by the daemon).

Two ways to carry the bytes, chosen once at start and logged: the compiled relay (`relay`, default
`/usr/local/bin/svc-pg-relay`, built from `pg_relay.c` into the stock python image) forwards them
and sends the messages the audit needs down a pipe, which `Capture` feeds to the same `Session`s
off the clients' path; without the binary this program forwards them itself (`EpollProxy`), at
about ten times the relay's user CPU per message (README "Speed").

Configuration: JSON in env `SVC_PGPROXY_CONFIG` (or the file named by `SVC_PGPROXY_CONFIG_FILE`):

    {"listen": "0.0.0.0:5432", "upstream": "svc-db-upstream:5432", "service": "db",
     "audit_file": "/svc-audit/db-db.jsonl", "relay": "/usr/local/bin/svc-pg-relay"}
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import OrderedDict, deque
from typing import Callable, Iterator

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_STARTUP = 10000
STATEMENT_CHARS = 500

# --- SQL lexing (pure, unit-tested) ----------------------------------------------------------

_IDENT_START = re.compile(r"[A-Za-z_\u0080-\uffff]")
_IDENT_CHARS = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]*")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$")


def tokens(sql: str, limit: int | None = None) -> Iterator[tuple[str, str, int]]:
    """(kind, value, offset) tokens of `sql`: kind is `word` (lower-cased keyword or unquoted
    identifier), `ident` (quoted identifier, unquoted), `string`, `number`, `op` (one character)
    or `semi`. Comments and whitespace are skipped. Unterminated constructs end the input."""
    i, n, count = 0, len(sql), 0
    while i < n:
        if limit is not None and count >= limit:
            return
        c = sql[i]
        if c.isspace():
            i += 1
            continue
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "/" and sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            continue
        count += 1
        if c == ";":
            yield "semi", ";", i
            i += 1
        elif c == "'" or (c in "eE" and sql.startswith("'", i + 1)) or (c in "bBxXnN" and sql.startswith("'", i + 1)):
            start = i
            backslash = c in "eE"
            i = i + 1 if c == "'" else i + 2
            while i < n:
                ch = sql[i]
                if backslash and ch == "\\":
                    i += 2
                    continue
                if ch == "'":
                    if sql.startswith("''", i):
                        i += 2
                        continue
                    i += 1
                    break
                i += 1
            yield "string", sql[start:i], start
        elif c == '"' or (c in "uU" and sql.startswith('&"', i + 1)):
            start = i
            i = i + 1 if c == '"' else i + 3
            buf = []
            while i < n:
                if sql[i] == '"':
                    if sql.startswith('""', i):
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(sql[i])
                i += 1
            yield "ident", "".join(buf), start
        elif c == "$" and (m := _DOLLAR_TAG.match(sql, i)):
            tag = m.group(0)
            end = sql.find(tag, m.end())
            start = i
            i = n if end < 0 else end + len(tag)
            yield "string", sql[start:i], start
        elif _IDENT_START.match(c):
            m = _IDENT_CHARS.match(sql, i + 1)
            yield "word", sql[i:m.end()].lower(), i
            i = m.end()
        elif c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            start = i
            i += 1
            while i < n and (sql[i].isalnum() or sql[i] in "._"):
                i += 1
            yield "number", sql[start:i], start
        else:
            yield "op", c, i
            i += 1


def split_statements(sql: str) -> list[str]:
    """The statements of a simple-protocol query string, in order, without empty ones."""
    body = sql.rstrip().rstrip(";")
    if ";" not in body:  # the common case: one statement, maybe with a trailing ';'
        body = body.strip()
        return [body] if body else []
    out: list[str] = []
    start = 0
    depth = 0
    has_content = False
    for kind, value, pos in tokens(sql):
        if kind == "semi" and depth == 0:
            if has_content:
                out.append(sql[start:pos].strip())
            start, has_content = pos + 1, False
            continue
        has_content = True
        if kind == "op":
            if value == "(":
                depth += 1
            elif value == ")" and depth:
                depth -= 1
    if has_content:
        out.append(sql[start:].strip())
    return out


def _skip_parens(toks: list[tuple[str, str, int]], i: int) -> int:
    """Index after the balanced parenthesis group starting at toks[i] == '('."""
    depth = 0
    while i < len(toks):
        kind, value, _ = toks[i]
        if kind == "op" and value == "(":
            depth += 1
        elif kind == "op" and value == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _is(tok: tuple[str, str, int] | None, *words: str) -> bool:
    return tok is not None and tok[0] == "word" and tok[1] in words


def _name(toks: list[tuple[str, str, int]], i: int) -> tuple[str | None, str | None, int]:
    """(schema, table, next index) of a possibly qualified name at toks[i]."""
    parts: list[str] = []
    while i < len(toks) and toks[i][0] in ("word", "ident"):
        parts.append(toks[i][1])
        i += 1
        if i < len(toks) and toks[i][0] == "op" and toks[i][1] == ".":
            i += 1
            continue
        break
    if not parts:
        return None, None, i
    return (".".join(parts[:-1]) or None), parts[-1], i


_SIMPLE_WRITE = re.compile(
    r"\s*(insert\s+into|update|delete\s+from)\s+(?:only\s+)?([a-z_][a-z0-9_$]*)(?:\.([a-z_][a-z0-9_$]*))?(?=[\s(;*]|$)",
    re.I)


def write_targets(sql: str) -> tuple[str | None, list[tuple[str | None, str]], str | None]:
    """(main statement verb, [(schema, table)], copy direction) of a statement: the verb after
    any WITH clause (`insert`, `update`, `delete`, `merge`, `copy`, `truncate`, ...), the tables it
    writes and, for COPY, `from` or `to`."""
    m = _SIMPLE_WRITE.match(sql)
    if m:  # fast path: no comment, quoting or WITH before the table name
        verb = m.group(1).split()[0].lower()
        if m.group(3):
            return verb, [(m.group(2).lower(), m.group(3).lower())], None
        return verb, [(None, m.group(2).lower())], None
    toks = list(tokens(sql, limit=4000))
    i = 0
    while i < len(toks) and toks[i][0] == "op" and toks[i][1] == "(":
        i += 1
    if _is(toks[i] if i < len(toks) else None, "with"):
        i += 1
        if _is(toks[i] if i < len(toks) else None, "recursive"):
            i += 1
        while i < len(toks):
            i += 1  # the CTE name
            if i < len(toks) and toks[i][1] == "(":
                i = _skip_parens(toks, i)
            if _is(toks[i] if i < len(toks) else None, "as"):
                i += 1
            if _is(toks[i] if i < len(toks) else None, "not"):
                i += 1
            if _is(toks[i] if i < len(toks) else None, "materialized"):
                i += 1
            if i < len(toks) and toks[i][1] == "(":
                i = _skip_parens(toks, i)
            if i < len(toks) and toks[i][0] == "op" and toks[i][1] == ",":
                i += 1
                continue
            break
    if i >= len(toks) or toks[i][0] != "word":
        return None, [], None
    verb = toks[i][1]
    i += 1
    nxt = lambda: toks[i] if i < len(toks) else None  # noqa: E731
    if verb in ("insert", "merge"):
        if _is(nxt(), "into"):
            i += 1
    elif verb == "delete":
        if _is(nxt(), "from"):
            i += 1
    elif verb == "truncate":
        if _is(nxt(), "table"):
            i += 1
        tables = []
        while i < len(toks):
            if _is(toks[i], "only"):
                i += 1
            schema, table, i = _name(toks, i)
            if table is None:
                break
            tables.append((schema, table))
            if i < len(toks) and toks[i][1] == "*":
                i += 1
            if i < len(toks) and toks[i][1] == ",":
                i += 1
                continue
            break
        return verb, tables, None
    elif verb == "copy":
        if nxt() is not None and nxt()[1] == "(":
            return verb, [], "to"  # COPY (query) TO
    elif verb != "update":
        return verb, [], None
    if _is(nxt(), "only"):
        i += 1
    schema, table, i = _name(toks, i)
    if table is None:
        return verb, [], None
    direction = None
    if verb == "copy":
        if i < len(toks) and toks[i][1] == "(":
            i = _skip_parens(toks, i)
        direction = "from" if _is(toks[i] if i < len(toks) else None, "from") else "to"
    return verb, [(schema, table)], direction


_WRITE_TAGS = {"INSERT": "insert", "UPDATE": "update", "DELETE": "delete", "MERGE": "update", "COPY": "insert",
               "TRUNCATE": "delete"}


def parse_tag(tag: str) -> tuple[str, int | None]:
    """`INSERT 0 3` -> ("INSERT", 3); `UPDATE 2` -> ("UPDATE", 2); `TRUNCATE TABLE` -> ("TRUNCATE", None)."""
    parts = tag.split()
    if not parts:
        return "", None
    verb = parts[0].upper()
    count = None
    if len(parts) > 1 and parts[-1].isdigit():
        count = int(parts[-1])
    return verb, count


def writes_for(tag: str, sql: str | None) -> list[dict]:
    """The db_write details (without service/ts) a CommandComplete `tag` of statement `sql` means;
    [] when it is not a write."""
    verb, count = parse_tag(tag)
    operation = _WRITE_TAGS.get(verb)
    if operation is None:
        return []
    targets: list[tuple[str | None, str]] = []
    if sql is not None:
        main, targets, direction = write_targets(sql)
        if verb == "COPY" and direction != "from":
            return []
    elif verb == "COPY":
        return []
    if not targets:
        targets = [(None, None)]  # type: ignore[list-item]
    out = []
    for schema, table in targets:
        out.append({"table": f"{schema}.{table}" if schema and table else table, "schema": schema, "operation": operation,
                    "row_count": count if verb != "TRUNCATE" else None, "command": verb})
    return out


# CommandComplete verbs the audit acts on: the writes and the transaction control around them.
_AUDITED_TAGS = frozenset(verb.encode() for verb in (*_WRITE_TAGS, "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"))

_ROLLBACK_TO = re.compile(r"^\s*rollback\s+(?:(?:work|transaction)\s+)?to\s+(?:savepoint\s+)?(.+?)\s*;?\s*$", re.I | re.S)
_SAVEPOINT = re.compile(r"^\s*savepoint\s+(.+?)\s*;?\s*$", re.I | re.S)
_RELEASE = re.compile(r"^\s*release\s+(?:savepoint\s+)?(.+?)\s*;?\s*$", re.I | re.S)


def _savepoint_name(raw: str) -> str:
    raw = raw.strip()
    return raw[1:-1].replace('""', '"') if raw.startswith('"') and raw.endswith('"') else raw.lower()


# --- protocol state (pure, unit-tested with byte strings) -------------------------------------

END = None  # queue marker: a Query's or a Sync's end, answered by ReadyForQuery


class Session:
    """The audit state of one client connection. `frontend(type, body)` / `backend(type, body)` are
    fed complete messages; `emit(details, ts)` receives each finished write."""

    def __init__(self, service: str, emit: Callable[[dict, float], None]):
        self.service = service
        self.emit = emit
        self.pending: deque = deque()  # statement SQL (or None when unknown) or END
        self.prepared: dict[str, str] = {}
        self.portals: dict[str, str | None] = {}
        self.ready_seen = False
        self.txn: list[list] = []  # [details, ts, rolled_back]
        self.savepoints: list[tuple[str, int]] = []
        self.error = False
        self._split_cache: OrderedDict[str, list[str]] = OrderedDict()

    # frontend messages

    def frontend(self, t: int, body: bytes) -> None:
        if t == 0x51:  # 'Q'
            sql = body[:-1].decode("utf-8", "replace")
            self.pending.extend(self._split(sql))
            self.pending.append(END)
        elif t == 0x50:  # 'P' Parse: name, query, ...
            name_end = body.index(b"\0")
            q_end = body.index(b"\0", name_end + 1)
            self.prepared[body[:name_end].decode("utf-8", "replace")] = body[name_end + 1:q_end].decode("utf-8", "replace")
        elif t == 0x42:  # 'B' Bind: portal, statement, ...
            p_end = body.index(b"\0")
            s_end = body.index(b"\0", p_end + 1)
            self.portals[body[:p_end].decode("utf-8", "replace")] = self.prepared.get(
                body[p_end + 1:s_end].decode("utf-8", "replace"))
        elif t == 0x45:  # 'E' Execute: portal, max rows
            p_end = body.index(b"\0")
            self.pending.append(self.portals.get(body[:p_end].decode("utf-8", "replace")) or "")
        elif t == 0x53 or t == 0x46:  # 'S' Sync, 'F' FunctionCall: answered by ReadyForQuery
            self.pending.append(END)
        elif t == 0x43:  # 'C' Close: 'S' statement | 'P' portal, name
            name = body[1:body.index(b"\0", 1)].decode("utf-8", "replace")
            (self.prepared if body[:1] == b"S" else self.portals).pop(name, None)

    def _split(self, sql: str) -> list[str]:
        if ";" not in sql.rstrip().rstrip(";"):  # one statement: no lexing, no cache entry
            return split_statements(sql)
        hit = self._split_cache.get(sql)
        if hit is not None:
            return hit
        stmts = split_statements(sql)
        if len(sql) < 4096:
            self._split_cache[sql] = stmts
            if len(self._split_cache) > 256:
                self._split_cache.popitem(last=False)
        return stmts

    # backend messages

    def backend(self, t: int, body: bytes) -> None:
        if t == 0x43:  # 'C' CommandComplete
            space = body.find(b" ")
            if (body[:space] if space > 0 else body[:-1]).upper() not in _AUDITED_TAGS:  # SELECT, BEGIN, SET, ...
                self._pop_statement()
                return
            tag = body[:-1].decode("utf-8", "replace")
            sql = self._pop_statement()
            self._complete(tag, sql)
        elif t == 0x73 or t == 0x49:  # 's' PortalSuspended, 'I' EmptyQueryResponse
            self._pop_statement()
        elif t == 0x45:  # 'E' ErrorResponse
            self.error = True
        elif t == 0x5A:  # 'Z' ReadyForQuery
            status = body[:1]
            if not self.ready_seen:
                self.ready_seen = True
                return
            while self.pending:
                if self.pending.popleft() is END:
                    break
            if status == b"I":
                self._flush(committed=not self.error)
                self.error = False

    def _pop_statement(self) -> str | None:
        if self.pending and self.pending[0] is not END:
            stmt = self.pending.popleft()
            return stmt or None
        return None

    def _complete(self, tag: str, sql: str | None) -> None:
        verb, _ = parse_tag(tag)
        now = time.time()
        if verb == "COMMIT":
            self._flush(committed=True)
            return
        if verb == "ROLLBACK":
            m = _ROLLBACK_TO.match(sql or "")
            if m:
                name = _savepoint_name(m.group(1))
                for i in range(len(self.savepoints) - 1, -1, -1):
                    if self.savepoints[i][0] == name:
                        index = self.savepoints[i][1]
                        del self.savepoints[i + 1:]
                        for entry in self.txn[index:]:
                            entry[2] = True
                        break
                self.error = False
                return
            self._flush(committed=False)
            return
        if verb == "SAVEPOINT":
            m = _SAVEPOINT.match(sql or "")
            if m:
                self.savepoints.append((_savepoint_name(m.group(1)), len(self.txn)))
            return
        if verb == "RELEASE":
            return
        for details in writes_for(tag, sql):
            details = {"service": self.service, **details}
            if sql is not None:
                details["statement"] = sql[:STATEMENT_CHARS]
            self.txn.append([details, now, False])

    def _flush(self, committed: bool) -> None:
        for details, ts, rolled_back in self.txn:
            details["committed"] = committed and not rolled_back
            details["ts"] = _iso(ts)
            self.emit(details, ts)
        self.txn.clear()
        self.savepoints.clear()

    def close(self) -> None:
        """The client went away: an open transaction is rolled back by the server."""
        self._flush(committed=False)


class Framer:
    """Splits a typed-message byte stream into the messages whose type is in `wanted`, skipping
    the others by their length without buffering them. Headers are read in place in each
    received chunk; only a wanted message (or a header) cut by the chunk's end is copied aside."""

    def __init__(self, wanted: bytes, on_message: Callable[[int, bytes], None]):
        self.wanted = frozenset(wanted)
        self.on_message = on_message
        self.buf = bytearray()  # the start of a message cut by a chunk's end
        self.skip = 0  # bytes of an unwanted message still to come

    def feed(self, data) -> None:
        """Feed the next chunk (bytes or memoryview; nothing of it is kept by reference)."""
        n = len(data)
        pos = 0
        if self.skip:
            if n <= self.skip:
                self.skip -= n
                return
            pos, self.skip = self.skip, 0
        if self.buf:
            pos = self._finish_cut(data, pos)
            if pos < 0:
                return
        wanted = self.wanted
        while n - pos >= 5:
            t = data[pos]
            end = pos + 1 + _LENGTH(data, pos + 1)[0]
            if end > n:
                if t in wanted:
                    self.buf += data[pos:]
                else:
                    self.skip = end - n
                return
            if t in wanted:
                self._deliver(t, bytes(data[pos + 5:end]))
            pos = end if end > pos else pos + 5
        if pos < n:
            self.buf += data[pos:]

    def _finish_cut(self, data, pos: int) -> int:
        """Complete the message held in `buf` from `data[pos:]`: the position after it, or -1
        when `data` ends first."""
        buf, n = self.buf, len(data)
        if len(buf) < 5:
            take = min(5 - len(buf), n - pos)
            buf += data[pos:pos + take]
            pos += take
            if len(buf) < 5:
                return -1
        end = 1 + _LENGTH(buf, 1)[0]
        if buf[0] not in self.wanted:
            rest = max(end - len(buf), 0)
            buf.clear()
            if n - pos < rest:
                self.skip = rest - (n - pos)
                return -1
            return pos + rest
        take = min(max(end - len(buf), 0), n - pos)
        buf += data[pos:pos + take]
        pos += take
        if len(buf) < end:
            return -1
        t, body = buf[0], bytes(buf[5:])
        buf.clear()
        self._deliver(t, body)
        return pos

    def _deliver(self, t: int, body: bytes) -> None:
        try:
            self.on_message(t, body)
        except Exception as exc:  # a parse problem must never break the byte stream
            sys.stderr.write(f"pg proxy: message {chr(t)!r}: {type(exc).__name__}: {exc}\n")


_LENGTH = struct.Struct("!I").unpack_from

FRONTEND_WANTED = b"QPBESFC"
BACKEND_WANTED = b"CsIEZ"


# --- the proxy -------------------------------------------------------------------------------


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class AuditSink:
    """Audit lines are collected and written with one `write` by `flush()`, which the event loop
    calls after each batch of socket events (so a line waits microseconds, never a client's next
    request), and `main()` once more on the way out."""

    def __init__(self, path: str | None):
        self.fd = None
        self.lines: list[str] = []
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(self, type_: str, details: dict, ts: float) -> None:
        self.lines.append(json.dumps({"ts": _iso(ts), "type": type_, "details": details}, separators=(",", ":"),
                                     default=str) + "\n")

    def flush(self) -> None:
        if not self.lines:
            return
        text = "".join(self.lines)
        self.lines.clear()
        if self.fd is None:
            sys.stderr.write(text)
            return
        data = memoryview(text.encode())
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError as exc:  # as before batching: a failed audit write is reported, the relay goes on
            sys.stderr.write(f"pg proxy: audit write failed: {exc}\n")


class _EpSide:
    __slots__ = ("sock", "fd", "peer", "out", "reading", "conn", "is_client", "eof", "framer")

    def __init__(self, sock: socket.socket, conn: "_EpConn", is_client: bool):
        self.sock = sock
        self.fd = sock.fileno()
        self.peer: _EpSide | None = None
        self.out = bytearray()  # bytes waiting to be written to this side
        self.reading = True
        self.conn = conn
        self.is_client = is_client
        self.eof = False
        self.framer: Framer | None = None


class _EpConn:
    __slots__ = ("client", "server", "session", "in_startup", "startup", "passthrough", "connected", "closed")

    def __init__(self, proxy: "EpollProxy", client: socket.socket, server: socket.socket):
        self.session = Session(proxy.service, lambda d, ts: proxy.audit.emit("db_write", d, ts))
        self.client = _EpSide(client, self, True)
        self.server = _EpSide(server, self, False)
        self.client.peer, self.server.peer = self.server, self.client
        self.client.framer = Framer(FRONTEND_WANTED, self.session.frontend)
        self.server.framer = Framer(BACKEND_WANTED, self.session.backend)
        self.in_startup = True
        self.startup = bytearray()
        self.passthrough = False
        self.connected = False
        self.closed = False


class EpollProxy:
    """The proxy's event loop: one thread, `select.epoll` over non-blocking sockets, no asyncio
    machinery between a `recv` and the `send` that forwards it (that machinery is most of a
    Python proxy's cost per message). Bytes are forwarded first, then fed to the parsers."""

    def __init__(self, proxy: "PgProxy"):
        self.proxy = proxy
        self.service = proxy.service
        self.audit = proxy.audit
        self.ep = select.epoll()
        self.sides: dict[int, _EpSide] = {}
        self._dns: tuple[float, list] | None = None
        # every recv lands here; what must outlive the call (unsent bytes, a cut message) is copied
        self._rbuf = bytearray(262144)
        self._rview = memoryview(self._rbuf)

    def _upstream_addrs(self) -> list:
        now = time.monotonic()
        if self._dns is None or self._dns[0] < now:
            infos = socket.getaddrinfo(*self.proxy.upstream, type=socket.SOCK_STREAM)
            self._dns = (now + 5.0, infos)
        return self._dns[1]

    def _events(self, side: _EpSide) -> int:
        mask = 0
        if side.reading and not side.eof:
            mask |= select.EPOLLIN | select.EPOLLRDHUP
        if side.out or (not side.is_client and not side.conn.connected):
            mask |= select.EPOLLOUT
        return mask

    def _update(self, side: _EpSide) -> None:
        if side.fd in self.sides:
            self.ep.modify(side.fd, self._events(side))

    def serve(self) -> None:
        listener = socket.create_server(self.proxy.listen, backlog=512)
        listener.setblocking(False)
        lfd = listener.fileno()
        self.ep.register(lfd, select.EPOLLIN)
        sys.stderr.write(f"svc pg proxy for service '{self.service}' listening on {self.proxy.listen[0]}:"
                         f"{self.proxy.listen[1]}, upstream {self.proxy.upstream[0]}:{self.proxy.upstream[1]}\n")
        sys.stderr.flush()
        while True:
            self.audit.flush()
            for fd, ev in self.ep.poll():
                if fd == lfd:
                    self._accept(listener)
                    continue
                side = self.sides.get(fd)
                if side is None:
                    continue
                try:
                    if ev & select.EPOLLOUT:
                        self._writable(side)
                    if ev & (select.EPOLLIN | select.EPOLLRDHUP) and fd in self.sides:
                        self._readable(side)
                    if ev & (select.EPOLLHUP | select.EPOLLERR) and fd in self.sides:
                        for _ in range(64):  # what is still buffered, then done
                            if fd not in self.sides or side.eof:
                                break
                            self._readable(side)
                        self._close(side.conn)
                except OSError:
                    self._close(side.conn)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                sys.stderr.write(f"pg proxy: accept failed: {exc}\n")
                return
            try:
                family, type_, proto, _, addr = self._upstream_addrs()[0]
                server = socket.socket(family, type_, proto)
            except OSError as exc:
                sys.stderr.write(f"pg proxy: cannot reach {self.proxy.upstream}: {exc}\n")
                client.close()
                continue
            for sock in (client, server):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _EpConn(self, client, server)
            err = server.connect_ex(addr)
            if err not in (0, errno.EINPROGRESS):
                client.close()
                server.close()
                continue
            conn.connected = err == 0
            for side in (conn.client, conn.server):
                self.sides[side.fd] = side
                self.ep.register(side.fd, self._events(side))

    def _writable(self, side: _EpSide) -> None:
        conn = side.conn
        if not side.is_client and not conn.connected:
            err = side.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                sys.stderr.write(f"pg proxy: cannot reach {self.proxy.upstream}: {os.strerror(err)}\n")
                self._close(conn)
                return
            conn.connected = True
        if side.out:
            n = side.sock.send(side.out)
            del side.out[:n]
        if not side.out:
            side.peer.reading = True
            self._update(side.peer)
            if side.peer.eof:
                try:
                    side.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        self._update(side)

    def _send(self, side: _EpSide, data) -> None:
        """Write to `side` now if possible; buffer the rest and pause its peer's reading."""
        if not side.out and (side.is_client or side.conn.connected):
            try:
                n = side.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            if n == len(data):
                return
            data = data[n:]
        side.out += data
        if len(side.out) > (1 << 20):
            side.peer.reading = False
            self._update(side.peer)
        self._update(side)

    def _readable(self, side: _EpSide) -> None:
        conn = side.conn
        try:
            size = side.sock.recv_into(self._rbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            size = 0
        if not size:
            side.eof = True
            peer = side.peer
            if not peer.out:
                try:
                    peer.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            if peer.eof:
                self._close(conn)
            else:
                self._update(side)
            return
        data = self._rview[:size]
        if side.is_client and conn.in_startup:
            conn.startup += data
            self._startup(conn)
            return
        self._send(side.peer, data)
        if not conn.passthrough:
            side.framer.feed(data)

    def _startup(self, conn: _EpConn) -> None:
        buf = conn.startup
        while conn.in_startup and len(buf) >= 8:
            length = int.from_bytes(buf[:4], "big")
            if length < 8 or length > MAX_STARTUP:
                self._close(conn)
                return
            if len(buf) < length:
                return
            code = int.from_bytes(buf[4:8], "big")
            message = bytes(buf[:length])
            del buf[:length]
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                self._send(conn.client, b"N")  # no TLS through the proxy: the client goes on in clear text
                continue
            conn.in_startup = False
            conn.passthrough = code == CANCEL_REQUEST
            self._send(conn.server, message)
        if not conn.in_startup and buf:
            rest = bytes(buf)
            buf.clear()
            self._send(conn.server, rest)
            if not conn.passthrough:
                conn.client.framer.feed(rest)

    def _close(self, conn: _EpConn) -> None:
        if conn.closed:
            return
        conn.closed = True
        for side in (conn.client, conn.server):
            if self.sides.pop(side.fd, None) is not None:
                try:
                    self.ep.unregister(side.fd)
                except OSError:
                    pass
            try:
                side.sock.close()
            except OSError:
                pass
        conn.session.close()


class Capture:
    """Reads the relay's pipe records (kind `F` frontend bytes | `B` backend bytes | `X` closed,
    u32 connection id, u32 length, payload) into one Session per connection."""

    _HEADER = struct.Struct("!cII")

    def __init__(self, service: str, audit: AuditSink):
        self.service = service
        self.audit = audit
        self.buf = bytearray()
        self.conns: dict[int, tuple[Session, Framer, Framer]] = {}

    def _conn(self, cid: int) -> tuple[Session, Framer, Framer]:
        conn = self.conns.get(cid)
        if conn is None:
            session = Session(self.service, lambda d, ts: self.audit.emit("db_write", d, ts))
            conn = self.conns[cid] = (session, Framer(FRONTEND_WANTED, session.frontend),
                                      Framer(BACKEND_WANTED, session.backend))
        return conn

    def feed(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, n = 0, len(buf)
        while n - pos >= 9:
            kind, cid, length = self._HEADER.unpack_from(buf, pos)
            end = pos + 9 + length
            if end > n:
                break
            if kind == b"X":
                conn = self.conns.pop(cid, None)
                if conn is not None:
                    conn[0].close()
            else:
                _, front, back = self._conn(cid)
                (front if kind == b"F" else back).feed(bytes(buf[pos + 9:end]))
            pos = end
        del buf[:pos]

    def close(self) -> None:
        """The relay is gone: its connections are too."""
        for session, _, _ in self.conns.values():
            session.close()
        self.conns.clear()


def run_relay(proxy: "PgProxy", relay: str) -> int:
    """Start the compiled relay and audit what it captures until it exits; its exit code."""
    read_fd, write_fd = os.pipe()
    try:
        fcntl.fcntl(write_fd, 1031, 1 << 20)  # F_SETPIPE_SZ: room for bursts while we parse
    except OSError:
        pass
    proc = subprocess.Popen([relay, proxy.listen[0], str(proxy.listen[1]), proxy.upstream[0], str(proxy.upstream[1]),
                             str(write_fd)], pass_fds=(write_fd,), stdin=subprocess.DEVNULL)
    os.close(write_fd)
    # on `docker stop` the relay hands over what its connections hold, then closes the pipe
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    capture = Capture(proxy.service, proxy.audit)
    while True:
        try:
            data = os.read(read_fd, 1 << 20)
        except InterruptedError:
            continue
        if not data:
            break
        capture.feed(data)
        proxy.audit.flush()
    capture.close()
    proxy.audit.flush()
    return proc.wait()


class PgProxy:
    def __init__(self, cfg: dict):
        self.service = str(cfg.get("service") or "db")
        host, _, port = str(cfg.get("upstream") or "127.0.0.1:5432").rpartition(":")
        self.upstream = (host or "127.0.0.1", int(port))
        self.audit = AuditSink(cfg.get("audit_file"))
        lhost, _, lport = str(cfg.get("listen") or "0.0.0.0:5432").rpartition(":")
        self.listen = (lhost or "0.0.0.0", int(lport))
        self.relay = str(cfg.get("relay", RELAY) or "")


def load_config() -> dict:
    path = os.environ.get("SVC_PGPROXY_CONFIG_FILE")
    if path:
        with open(path) as fh:
            return json.load(fh)
    return json.loads(os.environ.get("SVC_PGPROXY_CONFIG") or "{}")


RELAY = "/usr/local/bin/svc-pg-relay"


def main() -> None:
    proxy = PgProxy(load_config())
    if proxy.relay and os.access(proxy.relay, os.X_OK):
        sys.stderr.write(f"svc pg proxy for service '{proxy.service}': compiled relay {proxy.relay}\n")
        sys.stderr.flush()
        sys.exit(run_relay(proxy, proxy.relay))
    sys.stderr.write(f"svc pg proxy for service '{proxy.service}': no compiled relay at {proxy.relay or '-'}, "
                     "Python forwarding\n")
    try:
        EpollProxy(proxy).serve()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.audit.flush()


if __name__ == "__main__":
    main()
