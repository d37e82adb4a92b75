"""The pure parts of the checks: judge answers, SQL comparisons, mock assertions, custom reports."""
from __future__ import annotations

import pytest

from daemon.scoring.checks.custom import parse_report
from daemon.scoring.checks.http_mock_assertions import assess
from daemon.scoring.checks.llm_as_judge import JudgeError, parse_verdict
from daemon.scoring.checks.sql import judge, loose_eq
from daemon.spec import HttpMockAssertion, SqlCheck


def test_parse_verdict_variants():
    assert parse_verdict('{"score": 0.8, "reason": "ok"}') == (0.8, "ok")
    assert parse_verdict('Sure!\n```json\n{"score": 1, "reason": "great"}\n```') == (1.0, "great")
    assert parse_verdict('{"rating": 7}')[0] == pytest.approx(0.7)
    assert parse_verdict('{"score": "0.25"}')[0] == 0.25
    for bad in ("no json here", '{"reason": "x"}', '{"score": 500}', "{not json}", '{"score": true}'):
        with pytest.raises(JudgeError) as err:
            parse_verdict(bad)
        assert err.value.kind == "malformed_response"


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
