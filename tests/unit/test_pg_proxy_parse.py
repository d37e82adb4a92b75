"""The pure parts of the PostgreSQL audit proxy: SQL lexing, statement splitting, write targets,
CommandComplete tags, and the per-connection protocol state fed with real message bytes."""
from __future__ import annotations

import json
import struct

import pytest

from daemon.sandbox.programs.pg_proxy import (
    AuditSink,
    BACKEND_WANTED,
    Capture,
    FRONTEND_WANTED,
    Framer,
    Session,
    parse_tag,
    split_statements,
    write_targets,
    writes_for,
)


def msg(t: bytes, body: bytes) -> bytes:
    return t + struct.pack("!I", len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode() + b"\0"


# --- lexing and splitting ------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, expected",
    [
        ("select 1", ["select 1"]),
        ("select 1;", ["select 1"]),
        ("select 1; select 2", ["select 1", "select 2"]),
        ("select ';'; select 2", ["select ';'", "select 2"]),
        ("select 'it''s;'; select 2", ["select 'it''s;'", "select 2"]),
        ("select E'a\\';b'; select 2", ["select E'a\\';b'", "select 2"]),
        ("select $$a;b$$; select $x$;$x$", ["select $$a;b$$", "select $x$;$x$"]),
        ('select 1 as ";"; select 2', ['select 1 as ";"', "select 2"]),
        ("select 1 -- ; comment\n; select 2", ["select 1 -- ; comment", "select 2"]),
        ("select /* ; /* nested ; */ */ 1; select 2", ["select /* ; /* nested ; */ */ 1", "select 2"]),
        (";;  ; ", []),
        ("", []),
        ("create function f() returns int as $body$ begin; return 1; end $body$ language plpgsql; select f()",
         ["create function f() returns int as $body$ begin; return 1; end $body$ language plpgsql", "select f()"]),
    ],
)
def test_split_statements(sql, expected):
    assert split_statements(sql) == expected


@pytest.mark.parametrize(
    "sql, verb, tables, direction",
    [
        ("INSERT INTO users (id) VALUES (1)", "insert", [(None, "users")], None),
        ("insert into public.users values (1)", "insert", [("public", "users")], None),
        ('INSERT INTO "My Table" VALUES (1)', "insert", [(None, "My Table")], None),
        ("  -- c\n  insert /* x */ into t as a values (1)", "insert", [(None, "t")], None),
        ("UPDATE ONLY accounts SET x = 1", "update", [(None, "accounts")], None),
        ("update s.t a set x=1 from u where a.id=u.id", "update", [("s", "t")], None),
        ("DELETE FROM orders WHERE id = $1", "delete", [(None, "orders")], None),
        ("WITH x AS (SELECT 1), y(a) AS MATERIALIZED (SELECT (2)) INSERT INTO t SELECT * FROM x",
         "insert", [(None, "t")], None),
        ("with recursive r as not materialized (select 1) delete from log", "delete", [(None, "log")], None),
        ("MERGE INTO stock s USING delta d ON s.id = d.id WHEN MATCHED THEN UPDATE SET n = d.n", "merge",
         [(None, "stock")], None),
        ("COPY items (a, b) FROM STDIN", "copy", [(None, "items")], "from"),
        ("copy items to stdout", "copy", [(None, "items")], "to"),
        ("COPY (select 1) TO STDOUT", "copy", [], "to"),
        ("TRUNCATE TABLE a, ONLY b.c *, d", "truncate", [(None, "a"), ("b", "c"), (None, "d")], None),
        ("select 1", "select", [], None),
        ("", None, [], None),
    ],
)
def test_write_targets(sql, verb, tables, direction):
    assert write_targets(sql) == (verb, tables, direction)


def test_tags_and_writes():
    assert parse_tag("INSERT 0 3") == ("INSERT", 3)
    assert parse_tag("UPDATE 2") == ("UPDATE", 2)
    assert parse_tag("TRUNCATE TABLE") == ("TRUNCATE", None)
    assert writes_for("SELECT 5", "select * from t") == []
    assert writes_for("CREATE TABLE", "create table t()") == []
    assert writes_for("COPY 4", "copy t to stdout") == []
    [w] = writes_for("COPY 4", "copy t from stdin")
    assert (w["table"], w["operation"], w["row_count"], w["command"]) == ("t", "insert", 4, "COPY")
    [w] = writes_for("DELETE 7", None)
    assert (w["table"], w["operation"], w["row_count"]) == (None, "delete", 7)
    [a, b] = writes_for("TRUNCATE TABLE", "truncate a, b")
    assert (a["table"], b["table"], a["operation"], a["row_count"]) == ("a", "b", "delete", None)


# --- protocol state ------------------------------------------------------------------------


class Wire:
    """A Session behind two Framers, fed raw bytes in arbitrary pieces."""

    def __init__(self):
        self.events: list[dict] = []
        self.session = Session("db", lambda d, ts: self.events.append(d))
        self.front = Framer(FRONTEND_WANTED, self.session.frontend)
        self.back = Framer(BACKEND_WANTED, self.session.backend)
        self.back.feed(msg(b"R", struct.pack("!I", 0)) + msg(b"Z", b"I"))  # auth ok, first ready

    def client(self, data: bytes, piece: int = 0) -> None:
        feed(self.front, data, piece)

    def server(self, data: bytes, piece: int = 0) -> None:
        feed(self.back, data, piece)

    def summary(self):
        return [(e["table"], e["operation"], e["row_count"], e["committed"]) for e in self.events]


def feed(framer: Framer, data: bytes, piece: int) -> None:
    if not piece:
        framer.feed(data)
        return
    for i in range(0, len(data), piece):
        framer.feed(data[i:i + piece])


def cc(tag: str) -> bytes:
    return msg(b"C", cstr(tag))


def ready(status: bytes = b"I") -> bytes:
    return msg(b"Z", status)


def error() -> bytes:
    return msg(b"E", b"SERROR\0C42P01\0Mrelation does not exist\0\0")


@pytest.mark.parametrize("piece", [0, 1, 3, 7])
def test_simple_query_several_statements(piece):
    w = Wire()
    w.client(msg(b"Q", cstr("INSERT INTO a VALUES (1),(2),(3); UPDATE b SET x=1 WHERE y<3; SELECT 1")), piece)
    w.server(cc("INSERT 0 3") + cc("UPDATE 2") + msg(b"T", b"\0\0") + msg(b"D", b"\0\1\0\0\0\1" + b"1") + cc("SELECT 1")
             + ready(), piece)
    assert w.summary() == [("a", "insert", 3, True), ("b", "update", 2, True)]
    assert w.events[0]["service"] == "db" and w.events[0]["statement"].startswith("INSERT INTO a")


def test_implicit_transaction_error_rolls_back():
    w = Wire()
    w.client(msg(b"Q", cstr("insert into a values (1); select * from missing")))
    w.server(cc("INSERT 0 1") + error() + ready())
    assert w.summary() == [("a", "insert", 1, False)]


def test_explicit_transaction_commit_rollback_and_savepoints():
    w = Wire()
    w.client(msg(b"Q", cstr("begin; insert into a values (1); savepoint s1; delete from b; rollback to savepoint s1; "
                            "update c set x = 1; commit")))
    w.server(cc("BEGIN") + cc("INSERT 0 1") + cc("SAVEPOINT") + cc("DELETE 4") + cc("ROLLBACK") + cc("UPDATE 1")
             + cc("COMMIT") + ready())
    assert w.summary() == [("a", "insert", 1, True), ("b", "delete", 4, False), ("c", "update", 1, True)]
    w.events.clear()
    w.client(msg(b"Q", cstr("begin")))
    w.server(cc("BEGIN") + ready(b"T"))
    w.client(msg(b"Q", cstr("delete from a")))
    w.server(cc("DELETE 1") + ready(b"T"))
    assert w.events == []  # not yet: the transaction is open
    w.client(msg(b"Q", cstr("rollback")))
    w.server(cc("ROLLBACK") + ready())
    assert w.summary() == [("a", "delete", 1, False)]


def test_connection_closed_inside_transaction():
    w = Wire()
    w.client(msg(b"Q", cstr("begin; insert into a values (1)")))
    w.server(cc("BEGIN") + cc("INSERT 0 1") + ready(b"T"))
    w.session.close()
    assert w.summary() == [("a", "insert", 1, False)]


def extended(stmt_name: str, sql: str, portal: str = "") -> bytes:
    return (msg(b"P", cstr(stmt_name) + cstr(sql) + b"\0\0")
            + msg(b"B", cstr(portal) + cstr(stmt_name) + b"\0\0\0\0\0\0")
            + msg(b"D", b"P" + cstr(portal))
            + msg(b"E", cstr(portal) + b"\0\0\0\0"))


@pytest.mark.parametrize("piece", [0, 2, 5])
def test_extended_protocol_pipelined(piece):
    w = Wire()
    w.client(extended("", "INSERT INTO t (a) SELECT generate_series(1, $1::int)") + msg(b"S", b"")
             + extended("s1", "UPDATE t SET a = a + 1 WHERE a <= $1", portal="p1") + msg(b"S", b"")
             + extended("", "DELETE FROM gone") + extended("", "DELETE FROM never") + msg(b"S", b""), piece)
    parse_ok, bind_ok, nodata = msg(b"1", b""), msg(b"2", b""), msg(b"n", b"")
    w.server(parse_ok + bind_ok + nodata + cc("INSERT 0 3") + ready()
             + parse_ok + bind_ok + nodata + cc("UPDATE 2") + ready()
             + error() + ready(), piece)  # the first DELETE fails: the rest up to Sync is skipped
    assert w.summary() == [("t", "insert", 3, True), ("t", "update", 2, True)]
    # a named statement executed again later (prepared mode)
    w.events.clear()
    w.client(msg(b"B", cstr("") + cstr("s1") + b"\0\0\0\0\0\0") + msg(b"E", cstr("") + b"\0\0\0\0") + msg(b"S", b""))
    w.server(msg(b"2", b"") + cc("UPDATE 5") + ready())
    assert w.summary() == [("t", "update", 5, True)]


def test_empty_query_and_portal_suspended_keep_alignment():
    w = Wire()
    w.client(msg(b"Q", cstr("")))
    w.server(msg(b"I", b"") + ready())
    w.client(extended("", "INSERT INTO t SELECT 1 RETURNING *") + msg(b"S", b""))
    w.server(msg(b"1", b"") + msg(b"2", b"") + msg(b"s", b"") + ready())
    w.client(msg(b"Q", cstr("delete from t")))
    w.server(cc("DELETE 1") + ready())
    assert w.summary() == [("t", "delete", 1, True)]


def test_copy_from_stdin_passes_data():
    w = Wire()
    w.client(msg(b"Q", cstr("copy items from stdin")))
    w.server(msg(b"G", b"\0\0\0"))
    w.client(msg(b"d", b"1\tx\n") * 3 + msg(b"c", b""))
    w.server(cc("COPY 3") + ready())
    assert w.summary() == [("items", "insert", 3, True)]


def test_large_uninteresting_messages_are_skipped_not_buffered():
    w = Wire()
    w.client(msg(b"Q", cstr("select repeat('x', 1000000)")))
    big = msg(b"D", b"\0\1" + struct.pack("!I", 1_000_000) + b"x" * 1_000_000)
    for i in range(0, len(big), 65536):
        w.back.feed(big[i:i + 65536])
        assert len(w.back.buf) < 70000
    w.server(cc("SELECT 1") + ready())
    w.client(msg(b"Q", cstr("insert into t values (1)")))
    w.server(cc("INSERT 0 1") + ready())
    assert w.summary() == [("t", "insert", 1, True)]


def test_chunks_from_one_reused_receive_buffer():
    """The proxy receives every chunk into the same buffer: a message cut between chunks must
    survive the buffer being overwritten by the next one."""
    w = Wire()
    shared = bytearray(16)

    def reused(framer: Framer, data: bytes) -> None:
        for i in range(0, len(data), 16):
            piece = data[i:i + 16]
            shared[:len(piece)] = piece
            framer.feed(memoryview(shared)[:len(piece)])
            shared[:] = b"\xff" * 16

    reused(w.front, msg(b"Q", cstr("insert into accounts values (1), (2); delete from audit_log")))
    reused(w.back, cc("INSERT 0 2") + msg(b"D", b"\0\1" + struct.pack("!I", 40) + b"y" * 40) + cc("DELETE 9") + ready())
    assert w.summary() == [("accounts", "insert", 2, True), ("audit_log", "delete", 9, True)]


def test_audit_lines_written_together_on_flush(tmp_path):
    path = tmp_path / "audit" / "db.jsonl"
    sink = AuditSink(str(path))
    w = Wire()
    w.session.emit = lambda d, ts: sink.emit("db_write", d, ts)
    w.client(msg(b"Q", cstr("begin; insert into a values (1); update b set x = 2")))
    w.server(cc("BEGIN") + cc("INSERT 0 1") + cc("UPDATE 3") + ready(b"T"))
    w.session.close()  # the client went away mid-transaction
    sink.flush()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["type"], e["details"]["table"], e["details"]["committed"]) for e in lines] == [
        ("db_write", "a", False), ("db_write", "b", False)]


def test_a_failed_audit_write_is_reported_and_the_proxy_goes_on(capsys):
    sink = AuditSink("/dev/full")  # every write fails with ENOSPC
    sink.emit("db_write", {"table": "a"}, 0.0)
    sink.flush()
    assert "audit write failed" in capsys.readouterr().err


# --- the compiled relay's capture records -> the same events --------------------------------


def record(kind: bytes, conn: int, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!II", conn, len(payload)) + payload


class Lines(AuditSink):
    def __init__(self):
        super().__init__(None)


def written(sink: AuditSink) -> list[tuple]:
    details = [json.loads(line)["details"] for line in sink.lines]
    return [(d["table"], d["operation"], d["row_count"], d["committed"]) for d in details]


@pytest.mark.parametrize("piece", [0, 1, 4, 10])
def test_capture_records_of_two_connections_become_db_writes(piece):
    sink = Lines()
    capture = Capture("db", sink)
    stream = (record(b"B", 1, ready()) + record(b"B", 2, ready())
              + record(b"F", 2, msg(b"Q", cstr("begin; delete from b"))) + record(b"B", 2, cc("BEGIN") + cc("DELETE 2") + ready(b"T"))
              + record(b"F", 1, msg(b"Q", cstr("insert into a values (1)"))) + record(b"B", 1, cc("INSERT 0 1") + ready())
              + record(b"X", 2))  # connection 2 went away mid-transaction
    feed(capture, stream, piece)
    assert written(sink) == [("a", "insert", 1, True), ("b", "delete", 2, False)]


def test_capture_messages_cut_across_records_and_names_from_dropped_cycles():
    """Past its hold limit the relay passes bytes on as they arrive (messages cut anywhere); a
    statement prepared in a read-only cycle it dropped arrives alone, as a bare Parse."""
    sink = Lines()
    capture = Capture("db", sink)
    capture.feed(record(b"B", 7, ready()) + record(b"F", 7, msg(b"P", cstr("s1") + cstr("UPDATE t SET a = 1") + b"\0\0")))
    front = msg(b"B", cstr("") + cstr("s1") + b"\0\0\0\0\0\0") + msg(b"E", cstr("") + b"\0\0\0\0") + msg(b"S", b"")
    capture.feed(record(b"F", 7, front[:3]) + record(b"F", 7, front[3:]))
    back = cc("UPDATE 4") + ready()
    capture.feed(record(b"B", 7, back[:6]))
    assert sink.lines == []
    capture.feed(record(b"B", 7, back[6:]))
    assert written(sink) == [("t", "update", 4, True)]


def test_capture_closed_by_the_relay_ends_open_transactions():
    sink = Lines()
    capture = Capture("db", sink)
    capture.feed(record(b"B", 3, ready()) + record(b"F", 3, msg(b"Q", cstr("begin; insert into a values (1)")))
                 + record(b"B", 3, cc("BEGIN") + cc("INSERT 0 1") + ready(b"T")))
    capture.close()
    assert written(sink) == [("a", "insert", 1, False)]
