"""The effect ledger built from a stored trajectory (daemon/effects/ledger.py), the differences
between two runs (diff.py) and between the replicas of one scenario in two experiments (replicas.py)."""
from __future__ import annotations

from typing import Any

from daemon.effects.diff import diff_runs
from daemon.effects.ledger import build
from daemon.effects.replicas import scenario_differences

ALL = {"db_write", "http_call", "process_spawn", "file_write", "stdout", "warning"}


def db(table: str, op: str, rows: int | None, service: str = "db") -> dict[str, Any]:
    return {"type": "db_write", "details": {"service": service, "table": table, "operation": op, "row_count": rows,
                                            "command": op.upper(), "committed": True}}


def http(method: str, host: str, path: str, status: int = 200, **extra: Any) -> dict[str, Any]:
    return {"type": "http_call", "details": {"method": method, "host": host, "path": path, "status": status, **extra}}


def spawn(command: str, code: int = 0) -> dict[str, Any]:
    return {"type": "process_spawn", "details": {"command": command, "exit_code": code}}


def llm(model: str, tin: int, tout: int, usd: float | None = None, status: str = "ok") -> dict[str, Any]:
    cost: dict[str, Any] = {"model": model, "input_tokens": tin, "output_tokens": tout}
    if usd is not None:
        cost["estimated_usd"] = usd
    return {"event_type": "llm_call", "status": status, "cost": cost}


def ledger(events: list[dict[str, Any]], window: list[int] | None = None, run_id: str = "run_a", shown: set[str] = ALL,
           **trajectory: Any):
    row = {"id": run_id, "spec_id": "s", "spec_version": 1, "experiment_id": None, "scenario_id": None, "status": "passed"}
    doc: dict[str, Any] = {"audit_events": events, **trajectory}
    if window is not None:
        doc["agent_audit_window"] = window
    return build(doc, row, shown)


def test_the_ledger_counts_the_agents_window_only():
    setup = [db("orders", "insert", 5), spawn("seed.sh")]
    agent = [db("orders", "insert", 2), db("orders", "insert", 1), db("orders", "update", 1), db("public_x", "delete", None),
             http("POST", "api.example.test", "/v1/refunds?id=1"), http("POST", "api.example.test", "/v1/refunds", 502),
             http("GET", "evil.test", "/", 403, blocked=True), spawn("ls"), spawn("ls", 2)]
    checks = [spawn("test -f answer.txt")]
    got = ledger(setup + agent + checks, window=[2, 2 + len(agent)],
                 trace_events=[llm("gpt-x", 10, 5, 0.01), llm("gpt-x", 20, 1, 0.02, status="error"), {"event_type": "tool_use"}],
                 workspace_changes=[{"path": "/workspace/a.txt", "change": "added"}],
                 container_changes=[{"path": "/etc/hosts", "change": "modified"}])
    assert got.window == "agent" and not got.notes
    assert [(d.table, d.operation, d.rows, d.transactions) for d in got.db] == [
        ("orders", "insert", 3, 2), ("orders", "update", 1, 1), ("public_x", "delete", None, 1)]
    assert [(h.method, h.host, h.path, h.calls, h.statuses) for h in got.http] == [
        ("POST", "api.example.test", "/v1/refunds", 2, {"200": 1, "502": 1}), ("GET", "evil.test", "/", 1, {"blocked": 1})]
    assert [(m.model, m.calls, m.errors, m.input_tokens, m.output_tokens, m.cost_usd) for m in got.models] == [
        ("gpt-x", 2, 1, 30, 6, 0.03)]
    assert [(f.where, f.path, f.change) for f in got.files] == [("container", "/etc/hosts", "modified"),
                                                                ("workspace", "/workspace/a.txt", "added")]
    assert [(p.command, p.count, p.exit_codes) for p in got.processes] == [("ls", 2, [0, 2])]


def test_without_a_window_the_whole_run_counts_and_says_so():
    got = ledger([db("orders", "insert", 5)])
    assert got.window == "run" and got.db[0].rows == 5 and "before the agent's window" in got.notes[0]


def test_switches_that_are_off_make_a_source_unknown():
    got = ledger([], window=[0, 0], shown={"warning"})
    assert (got.sources.db, got.sources.http, got.sources.processes, got.sources.workspace_files) == (False, False, False, False)


def test_the_file_watcher_gives_the_workspaces_net_changes_without_a_diff():
    events = [{"type": "file_write", "details": {"path": p, "operation": op}} for p, op in [
        ("/workspace/tmp", "create"), ("/workspace/tmp", "delete"), ("/workspace/new", "create"), ("/workspace/new", "modify"),
        ("/workspace/config.yaml", "delete"), ("/workspace/old", "modify"), ("/workspace/r", "read")]]
    got = ledger(events, window=[0, len(events)])
    assert [(f.path, f.change) for f in got.files] == [("/workspace/config.yaml", "deleted"), ("/workspace/new", "added"),
                                                        ("/workspace/old", "modified")]


def test_two_runs_differ_in_what_one_did_more_or_alone():
    a = ledger([db("orders", "insert", 3), http("POST", "api.example.test", "/v1/refunds"), db("logs", "insert", 1)],
               window=[0, 3], workspace_changes=[{"path": "/workspace/config.yaml", "change": "modified"}], container_changes=[])
    b = ledger([http("POST", "api.example.test", "/v1/refunds"), http("POST", "api.example.test", "/v1/refunds"),
                db("logs", "insert", 1)], window=[0, 3], run_id="run_b",
               workspace_changes=[{"path": "/workspace/config.yaml", "change": "deleted"}], container_changes=[])
    got = diff_runs(a, b)
    assert (got.a, got.b, got.unknown) == ("run_a", "run_b", [])
    assert {d.key: (d.a, d.b, d.message) for d in got.differences} == {
        "db orders insert": (3, None, "A inserted 3 rows into orders (B none)"),
        "http POST api.example.test/v1/refunds": (1, 2, "B POSTed api.example.test/v1/refunds twice (A once)"),
        "file /workspace/config.yaml": ("modified", "deleted", "A modified /workspace/config.yaml (B deleted)"),
    }


def test_the_same_effects_make_no_difference_and_unknown_kinds_are_not_compared():
    a = ledger([db("orders", "insert", 3), spawn("x")], window=[0, 2])
    b = ledger([db("orders", "insert", 3)], window=[0, 1], run_id="run_b", shown=ALL - {"process_spawn"})
    got = diff_runs(a, b)
    assert got.differences == [] and "process" in got.unknown


def test_a_scenarios_runs_name_differences_between_sides_and_between_replicas():
    def run(rows: int | None, calls: int) -> Any:
        events = ([db("orders", "insert", rows)] if rows else []) + [http("POST", "api.example.test", "/v1/refunds")] * calls
        return ledger(events, window=[0, len(events)])

    got = scenario_differences([run(3, 1), run(3, 1)], [run(None, 1), run(None, 2)])
    assert [(d.side, d.key, d.baseline, d.candidate) for d in got] == [
        ("between", "db orders insert", [3, 3], [None, None]),
        ("candidate", "http POST api.example.test/v1/refunds", [1, 1], [1, 2]),
    ]
    assert got[0].message == "baseline inserted 3 rows into orders (candidate none)"
    assert got[1].message == "the candidate's 2 replicas differ on POST api.example.test/v1/refunds (http): 1, 2"
    assert scenario_differences([run(3, 1)], [run(3, 1)]) == []


def test_an_effect_in_every_run_of_one_side_only_is_a_difference_even_when_its_value_varies():
    def run(rows: int | None) -> Any:
        events = [db("orders", "insert", rows)] if rows else []
        return ledger(events, window=[0, len(events)])

    got = scenario_differences([run(1), run(2)], [run(None), run(None)])
    assert [(d.side, d.message) for d in got] == [
        ("between", "orders insert (db): in every baseline run (1, 2), in no candidate run"),
        ("baseline", "the baseline's 2 replicas differ on orders insert (db): 1, 2"),
    ]


def test_effect_rules_bound_rows_per_table_and_calls_per_host():
    from daemon.scoring.forbidden import TrajectoryView, evaluate
    from daemon.spec.blocks import Forbidden

    rules = Forbidden.model_validate({"effects": {"db": {"public.orders": {"insert": "<= 1", "delete": 5}, "logs": {"ddl": "== 0"}},
                                                  "http": {"API.example.test": {"post": 1, "*": "< 5"}, "other.test": {"GET": ">= 1"}}}})
    events = [db("orders", "insert", 1), db("orders", "insert", 1), db("orders", "delete", None),
              http("POST", "api.example.test", "/v1/refunds"), http("POST", "api.example.test", "/v1/refunds"),
              http("POST", "api.example.test", "/v1/refunds", 403, blocked=True)]
    results, violations = evaluate(rules, TrajectoryView(audit_events=events))
    assert [r["status"] for r in results if r["name"] == "effects"] == ["failed"]
    assert [v["message"] for v in violations] == [
        "2 row(s) (insert) on table 'public.orders'; the rule allows <= 1",
        "an unknown number of row(s) (delete) on table 'public.orders'; the rule allows <= 5",
        "2 post call(s) to API.example.test; the rule allows <= 1",
        "0 GET call(s) to other.test; the rule allows >= 1",
    ]
    _, none = evaluate(rules.model_copy(update={"effects": Forbidden.model_validate(
        {"effects": {"db": {"orders": {"update": 0}}}}).effects}), TrajectoryView(audit_events=events))
    assert none == []


def test_effect_bounds_are_checked_when_the_spec_loads():
    import pytest
    from pydantic import ValidationError

    from daemon.spec.blocks import Forbidden

    assert Forbidden.model_validate({"effects": {"http": {"h": {"POST": 0}}}}).effects.http == {"h": {"POST": "<= 0"}}
    for bad in ({"db": {"orders": {"upsert": 1}}}, {"http": {"h": {"POST": "about 2"}}}, {"http": {"h": {"POST": -1}}},
                {"http": {"h": {"POST": True}}}, {"files": {}}):
        with pytest.raises(ValidationError):
            Forbidden.model_validate({"effects": bad})
