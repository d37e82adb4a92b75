"""Forbidden rules over audit events, traces, captured output and workspace changes."""
from __future__ import annotations

from daemon.scoring.forbidden import TrajectoryView, evaluate
from daemon.scoring.forbidden import db_writes_outside, file_writes_outside, http_except, secrets_in_logs, trace_tools
from daemon.spec import Forbidden


def audit(type, **details):
    return {"ts": "2024-01-01T00:00:00Z", "sandbox_id": "sb-1", "type": type, "details": details}


def test_db_writes_outside_allows_listed_tables_with_or_without_schema():
    view = TrajectoryView(audit_events=[
        audit("db_write", service="db", table="public.orders", operation="insert", row_count=1),
        audit("db_write", service="db", table='"Audit"', operation="update", row_count=2),
        audit("db_write", service="db", table="users", operation="delete", row_count=3),
        audit("http_call", host="x"),
    ])
    found = db_writes_outside.check(["orders", "audit"], view)
    assert [v["event"]["details"]["table"] for v in found] == ["users"]
    assert found[0]["code"] == "invariant_violation" and found[0]["rule"] == "db_writes_outside"
    assert "delete on table 'users'" in found[0]["message"]
    assert len(db_writes_outside.check([], view)) == 3


def test_http_except_by_service_name_port_and_dns_override():
    view = TrajectoryView(
        audit_events=[
            audit("http_call", method="GET", host="mock:8080", path="/a", status=200),
            audit("http_call", method="GET", host="api.example.com", path="/b", status=200),
            audit("http_call", method="POST", host="evil.example.org", path="/c", status=403),
        ],
        dns_overrides={"api.example.com": "mock"},
    )
    found = http_except.check(["mock"], view)
    assert len(found) == 1 and "evil.example.org/c" in found[0]["message"]
    assert len(http_except.check([], view)) == 3  # empty list: no HTTP at all


def test_http_except_uses_the_proxy_service_and_refusals():
    view = TrajectoryView(audit_events=[
        audit("http_call", method="POST", host="10.0.0.5", port=80, path="/x", status=200, service="pay"),
        audit("warning", kind="egress_refused", host="example.com", port=443, method="CONNECT"),
        audit("http_call", method="GET", host="blocked.org", path="/", status=403, blocked=True),
        audit("warning", kind="egress_refused", host="blocked.org", port=80, method="GET"),
    ])
    found = http_except.check(["pay"], view)
    assert sorted(host_of_event(v) for v in found) == ["blocked.org", "example.com"]


def host_of_event(v):
    return v["event"]["details"]["host"]


def test_secrets_in_logs_names_the_secret_never_the_value():
    value = "s3cr3t-token-value"
    view = TrajectoryView(
        outputs={"stdout": f"hello\nusing {value}\n", "stderr": ""},
        audit_events=[audit("stdout", stdout=f"x {value}"), audit("process_spawn", command="env", stdout="clean")],
        trace_events=[{"event_type": "tool_call", "tool": "shell", "span_id": "s1", "input": f"echo {value}", "output": ""}],
        secrets={"API_TOKEN": value, "SHORT": "abc"},
    )
    found = secrets_in_logs.check("deny", view)
    assert [v["source"] for v in found] == ["stdout", "audit", "trace"]
    assert found[0]["event"] == {"secret": "API_TOKEN", "stream": "stdout", "line": 2}
    assert all(value not in repr(v) for v in found)
    assert secrets_in_logs.check("deny", TrajectoryView(outputs={"stdout": "abc"}, secrets={"SHORT": "abc"})) == []


def test_file_writes_outside_from_the_audit_log():
    view = TrajectoryView(
        file_audit=True,
        audit_events=[
            audit("file_write", path="/workspace/src/app.py", operation="modified"),
            audit("file_write", path="/workspace/.svc/task.json"),
            audit("file_write", path="/workspace/secrets.txt", operation="added"),
            audit("file_write", path="notes/x.md"),
            audit("file_write", path="/workspace/README.md", operation="read"),
        ],
        workspace_changes=[{"path": "/workspace/secrets.txt", "change": "added"}, {"path": "/workspace/other.txt", "change": "added"}],
    )
    found = file_writes_outside.check(["src", "/workspace/notes/"], view)
    assert [(v["source"], v["event"]["path"]) for v in found] == [("audit", "/workspace/secrets.txt"), ("workspace", "/workspace/other.txt")]


def test_file_writes_outside_from_the_workspace_diff_and_container():
    view = TrajectoryView(
        workspace_changes=[{"path": "/workspace/report.txt", "change": "added"}, {"path": "/workspace/srcx/a", "change": "added"}],
        container_changes=[{"path": "/etc/evil", "change": "added"}],
    )
    found = file_writes_outside.check(["/workspace/report.txt", "/workspace/src"], view)
    assert [(v["source"], v["event"]["path"]) for v in found] == [("workspace", "/workspace/srcx/a"), ("container", "/etc/evil")]


def test_trace_tool_calls_refused_by_a_guard():
    view = TrajectoryView(trace_events=[
        {"event_type": "tool_call", "tool": "rm_rf", "error_type": "invariant_violation", "span_id": "s1", "status": "error"},
        {"event_type": "tool_call", "tool": "ls", "error_type": "tool_error", "span_id": "s2", "status": "error"},
        {"event_type": "llm_call", "tool": "gpt", "error_type": "invariant_violation", "span_id": "s3"},
    ])
    found = trace_tools.check(None, view)
    assert [v["event"]["tool"] for v in found] == ["rm_rf"]


def test_evaluate_checks_only_declared_rules():
    forbidden = Forbidden(http_except=[], db_writes_outside=["orders"])
    view = TrajectoryView(audit_events=[audit("http_call", host="x.com", method="GET", path="/")])
    results, violations = evaluate(forbidden, view)
    assert {r["invariant_id"]: r["status"] for r in results} == {
        "forbidden.db_writes_outside": "passed",
        "forbidden.http_except": "failed",
    }
    assert len(violations) == 1 and violations[0]["rule"] == "http_except"
    assert evaluate(Forbidden(), view) == ([], [])
