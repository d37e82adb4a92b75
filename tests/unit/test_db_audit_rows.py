"""db_audit.py's pure parts: the server's command and decoded rows -> db_write details."""
from __future__ import annotations

from daemon.sandbox.db_audit import SERVER_ARGS, event_details, relations, server_command


def test_server_command_turns_logical_decoding_on():
    assert server_command(None) == ["postgres", *SERVER_ARGS]
    assert server_command(["postgres", "-c", "fsync=off"]) == ["postgres", "-c", "fsync=off", *SERVER_ARGS]
    assert server_command(["-c", "fsync=off"]) == ["-c", "fsync=off", *SERVER_ARGS]


def test_server_command_leaves_other_programs_alone():
    assert server_command(["bash", "-c", "exec postgres"]) == ["bash", "-c", "exec postgres"]


def test_decoded_insert_in_public():
    row = {"rel": "public.items", "op": "INSERT", "rows": 3, "ts": "2026-01-01T00:00:00.000Z"}
    assert event_details("db", row) == [{"service": "db", "schema": "public", "table": "items", "operation": "insert",
                                         "row_count": 3, "command": "INSERT", "committed": True}]


def test_decoded_truncate_in_another_schema():
    got = event_details("db", {"rel": 'billing."My Table"', "op": "TRUNCATE", "rows": 1, "ts": "x"})
    assert [(g["table"], g["schema"], g["operation"], g["row_count"]) for g in got] == [
        ("billing.My Table", "billing", "delete", None)]


def test_a_truncate_of_several_tables_is_one_event_per_table():
    got = event_details("db", {"rel": "public.a, public.b", "op": "TRUNCATE", "rows": 1, "ts": "x"})
    assert [g["table"] for g in got] == ["a", "b"]


def test_quoted_names_keep_their_dots_commas_and_quotes():
    assert relations('public."a.b, c", s."x""y"') == [("public", "a.b, c"), ("s", 'x"y')]


def test_an_unbalanced_name_does_not_raise():
    assert relations('public."open') == [("public", "open")]
