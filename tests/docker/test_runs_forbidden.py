"""Forbidden rules triggered for real by scripted agents: each fails a run whose invariants all pass,
and the result names the rule and the event that broke it (a secret by name, never its value).
Each replays from its reproducer to the same verdict."""
from __future__ import annotations

import json

import pytest

from tests.support.runs import (
    cli_spec,
    inv,
    replay_with_cli,
    result,
    run_spec,
    start_run,
    upload,
    wait_run,
    wait_run_in_sandbox,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

TOKEN = "tok-9f8e7d6c5b4a-never-print-me"
OK = {"ok": inv({"type": "file_exists", "path": "done.txt"})}


async def test_secret_printed_to_stdout(api):
    doc = cli_spec("leaky", 'echo "calling the API with $API_TOKEN"; touch done.txt', OK,
                   secrets={"API_TOKEN": "env"}, audit={"stdout_capture": True}, forbidden={"secrets_in_logs": "deny"})
    run = await run_spec(api, doc, secrets={"API_TOKEN": TOKEN})
    assert result(run, "ok")["status"] == "passed"
    assert run["status"] == "failed" and "secrets_in_logs" in run["reason"]
    violation = run["violations"][0]
    assert violation["rule"] == "secrets_in_logs" and violation["code"] == "invariant_violation"
    assert violation["source"] == "stdout" and violation["event"] == {"secret": "API_TOKEN", "stream": "stdout", "line": 1}
    assert TOKEN not in json.dumps(run)
    response = await api.client.get(run["trajectory_url"])
    trajectory = await response.text()
    assert TOKEN not in trajectory and "calling the API with ***" in trajectory

    code, replayed = await replay_with_cli(api, {"reproducer": {"command": run["reproducer"]["command"] + f" --secret API_TOKEN={TOKEN}"}})
    assert code == 1 and replayed["violations"][0]["rule"] == "secrets_in_logs"


async def test_quiet_secret_is_fine(api):
    doc = cli_spec("discreet", 'test -n "$API_TOKEN" && echo "token present"; touch done.txt', OK,
                   secrets={"API_TOKEN": "env"}, audit={"stdout_capture": True}, forbidden={"secrets_in_logs": "deny"})
    run = await run_spec(api, doc, secrets={"API_TOKEN": TOKEN})
    assert run["status"] == "passed" and run["violations"] == []


async def test_write_outside_allowed_prefixes(api):
    script = "mkdir -p out && echo ok > out/ok.txt && echo x > stray.txt && echo y > /tmp/evil.txt && touch out/done.txt"
    doc = cli_spec("stray-writes", script, {"ok": inv({"type": "file_exists", "path": "out/done.txt"})},
                   forbidden={"file_writes_outside": ["out"]})
    run = await run_spec(api, doc)
    assert result(run, "ok")["status"] == "passed"
    assert run["status"] == "failed"
    found = {(v["source"], v["event"]["path"]) for v in run["violations"]}
    assert found == {("workspace", "/workspace/stray.txt"), ("container", "/tmp/evil.txt")}, run["violations"]
    assert all(v["rule"] == "file_writes_outside" for v in run["violations"])
    code, replayed = await replay_with_cli(api, run)
    assert code == 1 and {v["event"]["path"] for v in replayed["violations"]} == {"/workspace/stray.txt", "/tmp/evil.txt"}


async def test_writes_inside_prefixes_are_fine(api):
    doc = cli_spec("tidy-writes", "mkdir -p out && echo ok > out/done.txt", {"ok": inv({"type": "file_exists", "path": "out/done.txt"})},
                   forbidden={"file_writes_outside": ["/workspace/out/"]})
    run = await run_spec(api, doc)
    assert run["status"] == "passed", run["violations"]


async def test_forbidden_tool_call_in_the_trace(api):
    """The agent's tooling reports a tool call its guard refused; the run fails with code
    invariant_violation, the stream carries the tool_call, and the event is stamped with the run."""
    script = "for i in $(seq 300); do test -f go && break; sleep 0.1; done; touch done.txt"
    await upload(api, cli_spec("traced", script, OK))
    queued = await start_run(api, "traced")
    run = await wait_run_in_sandbox(api, queued["id"])
    sandbox_id = run["sandbox_id"]
    events = [
        {"event_type": "tool_call", "tool": "list_files", "span_id": "span_ok1", "status": "ok", "duration_ms": 3},
        {"event_type": "tool_call", "tool": "drop_database", "span_id": "span_bad1", "status": "error",
         "error_type": "invariant_violation", "output": "refused by policy"},
    ]
    response, body = await api.post(f"/v1/sandboxes/{sandbox_id}/trace", json={"events": events})
    assert response.status == 202 and body["accepted"] == 2, body
    response, body = await api.post(f"/v1/sandboxes/{sandbox_id}/files", json={"path": "go", "content": "1"})
    assert response.status == 201, body
    run = await wait_run(api, queued["id"])
    assert result(run, "ok")["status"] == "passed" and run["status"] == "failed"
    violation = next(v for v in run["violations"] if v["rule"] == "trace_tool_calls")
    assert violation["code"] == "invariant_violation" and violation["event"]["tool"] == "drop_database"
    response, traced = await api.get("/v1/traces", params={"run_id": run["id"]})
    assert {e["tool"] for e in traced["items"]} == {"list_files", "drop_database"}
    response = await api.client.get(run["trajectory_url"])
    trajectory = await response.json()
    assert {e["tool"] for e in trajectory["trace_events"]} == {"list_files", "drop_database"}
    assert [(e["tool"], e["status"]) for e in trajectory["stream"] if e["type"] == "tool_call"] == [
        ("list_files", "ok"), ("drop_database", "error")]


DB = [{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}]
TABLES = [{"service": "db", "sql": "CREATE TABLE orders (id serial PRIMARY KEY, item text); CREATE TABLE users (id serial PRIMARY KEY, name text);"}]


async def test_db_write_outside_allowed_tables(api):
    script = ('psql "$SERVICE_SERVICE_DB_URL" -v ON_ERROR_STOP=1 -c "INSERT INTO orders (item) VALUES (\'book\')" '
              '-c "INSERT INTO users (name) VALUES (\'mallory\'), (\'eve\')"')
    doc = cli_spec("db-writer", script, {
        "ordered": inv({"type": "sql", "service": "db", "query": "SELECT count(*) FROM orders", "expect_scalar": 1}),
    }, services=DB, fixtures=TABLES, audit={"db_writes": True}, forbidden={"db_writes_outside": ["orders"]})
    run = await run_spec(api, doc)
    assert result(run, "ordered")["status"] == "passed"
    assert run["status"] == "failed", json.dumps(run, indent=1)[:3000]
    assert [(v["rule"], v["event"]["details"]["table"]) for v in run["violations"]] == [("db_writes_outside", "users")]
    details = run["violations"][0]["event"]["details"]
    assert details["operation"] == "insert" and details["row_count"] == 2 and details["service"] == "db"
    code, replayed = await replay_with_cli(api, run)
    assert code == 1 and replayed["violations"][0]["event"]["details"]["table"] == "users"


MOCK = [{"name": "pay", "type": "http_mock", "record": True,
         "routes": [{"method": "POST", "path": "/charge", "response": {"status": 200, "body": {"ok": True}}}]}]


async def test_http_outside_allowed_services(api):
    script = ('curl -s -X POST "$SERVICE_SERVICE_PAY_URL/charge" -d "{}" > charge.json; '
              "curl -s -m 5 http://example.com/exfiltrate > /dev/null; touch done.txt")
    doc = cli_spec("http-caller", script, {
        "charged": inv({"type": "http_mock_assertions", "service": "pay", "assertions": [{"method": "POST", "path": "/charge", "count": 1}]}),
    }, services=MOCK, audit={"http_calls": True}, forbidden={"http_except": ["pay"]})
    run = await run_spec(api, doc)
    assert result(run, "charged")["status"] == "passed"
    assert run["status"] == "failed", json.dumps(run, indent=1)[:3000]
    hosts = {v["event"]["details"]["host"] for v in run["violations"]}
    assert hosts == {"example.com"} and all(v["rule"] == "http_except" for v in run["violations"])
    code, replayed = await replay_with_cli(api, run)
    assert code == 1 and {v["event"]["details"]["host"] for v in replayed["violations"]} == {"example.com"}


async def test_no_http_at_all(api):
    doc = cli_spec("no-http", 'curl -s -m 5 "$SERVICE_SERVICE_PAY_URL/charge" -X POST > /dev/null; touch done.txt', OK,
                   services=MOCK, forbidden={"http_except": []})
    run = await run_spec(api, doc)
    assert run["status"] == "failed" and run["violations"][0]["rule"] == "http_except"


async def test_db_rule_without_db_audit_is_an_error_not_a_pass(api):
    doc = cli_spec("db-unaudited", "touch done.txt", OK, services=DB, fixtures=TABLES, forbidden={"db_writes_outside": []})
    run = await run_spec(api, doc)
    assert run["status"] == "errored" and run["reason"] == "forbidden_unverifiable"
    rule = result(run, "forbidden.db_writes_outside")
    assert rule["status"] == "skipped" and "audit.db_writes" in rule["evidence"]["error"]
