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


def keyed(table: str, op: str, keys: list[str], rows: int | None = None, more: bool = False,
          columns: tuple[str, ...] = ("id",)) -> dict[str, Any]:
    event = db(table, op, len(keys) if rows is None else rows)
    event["details"].update({"key_columns": list(columns), "keys": keys, "keys_more": more})
    return event


def test_db_writes_carry_the_keys_of_changed_rows_bounded():
    many = [str(i) for i in range(100, 118)]
    got = ledger([keyed("orders", "insert", ["3", "4"]), keyed("orders", "insert", ["4", "5"]),
                  keyed("orders", "insert", many), keyed("logs", "insert", [], rows=3, columns=()),
                  keyed("orders", "delete", ["9"]), db("orders", "delete", None)])
    by = {(d.table, d.operation): d for d in got.db}
    insert = by[("orders", "insert")]
    assert insert.key_columns == ["id"] and insert.keys == ["3", "4", "5", *many[:17]] and insert.keys_more
    assert (by[("logs", "insert")].key_columns, by[("logs", "insert")].keys) == ([], [])
    # a TRUNCATE of the table carried no keys: the listed keys are not all the rows
    assert by[("orders", "delete")].keys == ["9"] and by[("orders", "delete")].keys_more


def test_the_diff_names_the_keys_each_run_changed():
    a = ledger([keyed("orders", "insert", ["3", "4"])], run_id="a")
    b = ledger([], run_id="b")
    [d] = diff_runs(a, b).differences
    assert (d.a_keys, d.b_keys) == ("id=3,4", None)
    assert d.message == "A inserted 2 rows into orders, id=3,4 (B none)"
    c = ledger([keyed("orders", "insert", ["7"], more=True, columns=("k", '"A b"'))], run_id="c")
    [d] = diff_runs(c, a).differences
    assert d.message == "B inserted 2 rows into orders, id=3,4 (A 1: (k, \"A b\")=7,…)"
    [s] = scenario_differences([a, a], [b, b])
    assert s.message == "baseline inserted 2 rows into orders, id=3,4 (candidate none)"


def test_the_decoded_row_gives_the_events_keys():
    from daemon.sandbox.db_audit import KEY_SAMPLE, event_details

    row = {"rel": 'public."My T"', "op": "INSERT", "rows": KEY_SAMPLE + 1, "key_columns": ["k", '"A b"'],
           "keys": [["7", "q'u o]te"], ["8", "x"]], "ts": "2026-01-01T00:00:00.000Z"}
    [d] = event_details("db", row)
    assert (d["table"], d["key_columns"], d["keys"], d["keys_more"]) == ("My T", ["k", '"A b"'], ["(7, q'u o]te)", "(8, x)"], True)
    [d] = event_details("db", {"rel": "public.logs", "op": "INSERT", "rows": 3, "key_columns": None, "keys": None})
    assert "keys" not in d
    [d] = event_details("db", {"rel": "public.orders", "op": "TRUNCATE", "rows": 1, "key_columns": ["id"], "keys": None})
    assert "keys" not in d and d["row_count"] is None


EFFECTS_SPEC = """version: 1
id: s
base: {build: {}}
task: {prompt: hi}
invariants:
  one_refund:
    check:
      type: effects
%s
"""


def test_an_effects_invariant_loads_and_names_the_yaml_path_of_a_bad_bound():
    import pytest

    from daemon.sandbox.db_audit import needs_db_audit
    from daemon.sandbox.network import needs_service_traffic
    from daemon.spec import SpecValidationError, load_spec

    spec = load_spec(EFFECTS_SPEC % '      db: {orders: {insert: "<= 1"}}\n      http: {"api.example.test": {POST: 0}}')
    check = spec.invariants["one_refund"].check
    assert (check.type, check.db, check.http) == ("effects", {"orders": {"insert": "<= 1"}}, {"api.example.test": {"POST": "<= 0"}})
    assert needs_db_audit(spec) and needs_service_traffic(spec)  # the bounds turn on what they read
    only_http = load_spec(EFFECTS_SPEC % '      http: {"api.example.test": {POST: 0}}')
    assert not needs_db_audit(only_http) and needs_service_traffic(only_http)
    for body, message in [
        ('      db: {orders: {insert: "about 3"}}',
         "spec.yaml:9 invariants.one_refund.check.db.orders.insert: 'about 3' is not a bound"),
        ("      db: {orders: {upsert: 1}}",
         "spec.yaml:9 invariants.one_refund.check.db.orders.upsert: expected one of insert, update, delete, ddl"),
        ("      http: {}", "spec.yaml:7 invariants.one_refund.check: an effects check needs at least one bound"),
    ]:
        with pytest.raises(SpecValidationError) as caught:
            load_spec(EFFECTS_SPEC % body)
        assert message in str(caught.value), str(caught.value)


def test_the_spec_schema_offers_the_effects_check():
    import jsonschema

    from daemon.spec.schema import spec_json_schema

    schema = spec_json_schema()
    assert "EffectsCheck" in schema["$defs"]
    validator = jsonschema.Draft202012Validator(schema)
    doc = {"version": 1, "id": "s", "base": {"build": {}}, "task": {"prompt": "hi"},
           "invariants": {"x": {"check": {"type": "effects", "db": {"orders": {"insert": "<= 1"}}}}}}
    assert not list(validator.iter_errors(doc))
    doc["invariants"]["x"]["check"]["db"]["orders"]["insert"] = "about 1"
    assert list(validator.iter_errors(doc))


async def test_an_effects_invariant_names_the_bound_and_the_measured_value():
    from types import SimpleNamespace

    from daemon.scoring.checks import run_invariant
    from daemon.scoring.checks.context import CheckContext
    from daemon.spec import Invariant

    events = [db("orders", "insert", 3), http("POST", "api.example.test", "/v1/refunds"),
              http("POST", "api.example.test", "/v1/refunds"), http("POST", "evil.test", "/", 403, blocked=True)]
    ctx = CheckContext(sandbox=SimpleNamespace(), spec=None, agent_audit=events)
    inv = Invariant.model_validate({"check": {"type": "effects", "db": {"orders": {"insert": "<= 1"}},
                                              "http": {"api.example.test": {"POST": 1}, "evil.test": {"*": 0}}}})
    got = await run_invariant("one_refund", inv, ctx)
    assert (got.status, got.score, got.type) == ("failed", 0.0, "effects")
    assert got.evidence["message"] == ("3 row(s) (insert) on table 'orders'; the bound is <= 1; "
                                       "2 POST call(s) to api.example.test; the bound is <= 1")
    assert [(b.get("table") or b.get("host"), b["value"], b["bound"], b["holds"]) for b in got.evidence["bounds"]] == [
        ("orders", 3, "<= 1", False), ("api.example.test", 2, "<= 1", False), ("evil.test", 0, "<= 0", True)]
    inv = Invariant.model_validate({"check": {"type": "effects", "db": {"orders": {"insert": "== 3"}}}})
    got = await run_invariant("three", inv, ctx)
    assert (got.status, got.evidence["message"]) == (
        "passed", "every effect bound holds: 3 row(s) (insert) on table 'orders'; the bound is == 3")
