"""The pure parts of the checks: judge answers, SQL comparisons, mock assertions, custom reports."""
from __future__ import annotations

import pytest

from daemon.judges.client import Unparsable, parse_reply
from daemon.scoring.checks.custom import parse_report
from daemon.scoring.checks.http_mock_assertions import assess
from daemon.scoring.checks.sql import judge, loose_eq
from daemon.spec import HttpMockAssertion, SqlCheck


def test_judge_replies_are_parsed_strictly():
    assert parse_reply('{"score": 0.8, "reason": "ok"}') == parse_reply('```json\n{"score": 0.8, "reason": "ok"}\n```')
    assert (parse_reply('{"score": 1, "reason": "great"}').score, parse_reply('{"score": 0, "reason": "bad"}').score) == (1.0, 0.0)
    for bad in ("no json here", '{"reason": "x"}', '{"score": 500, "reason": "x"}', "{not json}", '{"score": true, "reason": "x"}',
                '{"rating": 7, "reason": "x"}', '{"score": "0.25", "reason": "x"}', '{"score": 0.5}'):
        with pytest.raises(Unparsable):
            parse_reply(bad)


def test_loose_eq():
    assert loose_eq(3, "3") and loose_eq(1.0, 1) and loose_eq("t", True) and loose_eq(None, None)
    assert not loose_eq(None, 0) and not loose_eq("a", "b") and not loose_eq(2, 3)
    assert loose_eq({"a": 1}, {"a": 1}) and not loose_eq([1], [2])


def test_sql_expectations():
    rows = [{"id": 1, "name": "ada"}, {"id": 2, "name": "grace"}]
    ok, ev = judge(SqlCheck(type="sql", service="db", query="q", expect_rows=2), rows)
    assert ok and ev["row_count"] == 2
    ok, ev = judge(SqlCheck(type="sql", service="db", query="q", expect_scalar=1), rows)
    assert ok and ev["value"] == 1
    ok, ev = judge(SqlCheck(type="sql", service="db", query="q", expect=[[1, "ada"], {"name": "grace"}]), rows)
    assert ok
    ok, ev = judge(SqlCheck(type="sql", service="db", query="q", expect=[[1, "ada"], {"name": "linus"}]), rows)
    assert not ok and "expected 'linus'" in ev["mismatch"]
    ok, ev = judge(SqlCheck(type="sql", service="db", query="q", expect_scalar=None), [])
    assert not ok


def test_mock_assertions():
    requests = [
        {"method": "POST", "path": "/charge?x=1", "body": {"amount": 5}},
        {"method": "POST", "path": "/charge", "body": "amount=7"},
        {"method": "GET", "path": "/users/3", "body": ""},
    ]
    assert assess(HttpMockAssertion(method="POST", path="/charge", count=2), requests)["passed"]
    result = assess(HttpMockAssertion(method="POST", path="/charge", count=1, body_contains='"amount": 5'), requests)
    assert result["passed"] and result["seen"] == 1
    assert assess(HttpMockAssertion(method="GET", path="/users/*", min_count=1), requests)["passed"]
    result = assess(HttpMockAssertion(method="GET", path="/users/*", max_count=0), requests)
    assert not result["passed"] and result["seen"] == 1


def test_custom_report_parsing():
    assert parse_report('{"passed": true, "score": 0.5}') == {"passed": True, "score": 0.5}
    assert parse_report('building...\nok\n{"passed": false}\n') == {"passed": False}
    assert parse_report("nothing") is None
    assert parse_report('{"score": 1}') is None
