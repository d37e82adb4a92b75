"""The effect ledger against a real daemon and real containers (daemon/effects/): two runs of agents
that differ in one database write show that write, and only it, in `GET /v1/runs/{id}/effects`, in
`GET /v1/runs/{a}/effects/diff?other=B` and through `svc runs effects` / `svc runs diff`; another
tenant gets 403; `eval compare` of two experiments of those agents names that write as the one
effect difference of their scenario."""
from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio

from tests.support.cli import svc_in_thread
from tests.support.runs import cli_spec, inv, run_spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

PSQL = 'psql -X -q -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL"'
FIXTURES = [{"service": "db", "sql": "CREATE TABLE orders (id int PRIMARY KEY, status text); CREATE TABLE logs (n int); "
                                     "INSERT INTO orders VALUES (1, 'open');"}]
DB = [{"name": "db", "type": "postgres"}]
LOGGED = {"logged": inv({"type": "sql", "service": "db", "query": "SELECT count(*) FROM logs", "expect_scalar": 3})}
BOTH = f"{PSQL} -c 'INSERT INTO logs SELECT generate_series(1, 3)'"
EXTRA = f"{PSQL} -c \"INSERT INTO orders VALUES (2, 'refund')\""


def agent_spec(spec_id: str, script: str) -> dict:
    return cli_spec(spec_id, script, LOGGED, services=DB, fixtures=FIXTURES, audit={"db_writes": True})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pair(api):
    a = await run_spec(api, agent_spec("effects-a", BOTH))
    b = await run_spec(api, agent_spec("effects-b", f"{BOTH} && {EXTRA}"))
    assert (a["status"], b["status"]) == ("passed", "passed"), (a, b)
    return a, b


async def test_each_run_shows_its_own_writes(api, pair):
    a, b = pair
    response, ledger_a = await api.get(f"/v1/runs/{a['id']}/effects")
    assert response.status == 200, ledger_a
    _, ledger_b = await api.get(f"/v1/runs/{b['id']}/effects")
    assert ledger_a["window"] == "agent" and ledger_a["sources"]["db"] and not ledger_a["sources"]["http"]
    rows = lambda ledger: [(d["table"], d["operation"], d["rows"]) for d in ledger["db"]]  # noqa: E731
    assert rows(ledger_a) == [("logs", "insert", 3)]  # the fixtures' writes happen before the audit starts
    assert rows(ledger_b) == [("logs", "insert", 3), ("orders", "insert", 1)]
    # the keys of the changed rows, where the table has a primary key (logs has none)
    keys = lambda ledger: [(d["table"], d["key_columns"], d["keys"], d["keys_more"]) for d in ledger["db"]]  # noqa: E731
    assert keys(ledger_b) == [("logs", [], [], False), ("orders", ["id"], ["2"], False)]


async def test_the_diff_is_exactly_the_one_write(api, pair):
    a, b = pair
    response, diff = await api.get(f"/v1/runs/{a['id']}/effects/diff", params={"other": b["id"]})
    assert response.status == 200, diff
    assert [(d["kind"], d["key"], d["a"], d["b"]) for d in diff["differences"]] == [("db", "db orders insert", None, 1)]
    assert diff["differences"][0]["message"] == "B inserted 1 row into orders, id=2 (A none)"
    assert (diff["differences"][0]["a_keys"], diff["differences"][0]["b_keys"]) == (None, "id=2")


async def test_the_cli_shows_the_ledger_and_the_diff(api, pair):
    a, b = pair
    code, out, err = await svc_in_thread(api, "runs", "effects", b["id"])
    assert code == 0, err
    assert "database writes:" in out and "HTTP calls: not recorded (audit.http_calls is off)" in out
    assert [line.split() for line in out.splitlines() if " orders " in line] == [["db", "orders", "insert", "1", "1", "id=2"]]
    code, out, err = await svc_in_thread(api, "runs", "effects", a["id"], "--json")
    assert code == 0 and json.loads(out)["db"][0]["table"] == "logs", err
    code, out, err = await svc_in_thread(api, "runs", "diff", a["id"], b["id"])
    assert code == 0, err
    assert out.splitlines()[1:] == ["  B inserted 1 row into orders, id=2 (A none)",
                                    "not compared (not recorded in both): file, http, process"]
    code, out, _ = await svc_in_thread(api, "runs", "diff", a["id"], a["id"], "--json")
    assert code == 0 and json.loads(out)["differences"] == []


async def test_another_tenants_run_is_refused(api, pair):
    a, b = pair
    response, body = await api.post("/v1/tenants", json={"name": "effects-intruder"})
    assert response.status == 201, body
    other = body["key"]["secret"]
    response, _ = await api.call("GET", f"/v1/runs/{a['id']}/effects", key=other)
    assert response.status == 403
    response, _ = await api.call("GET", f"/v1/runs/{a['id']}/effects/diff?other={b['id']}", key=other)
    assert response.status == 403
    response, _ = await api.get(f"/v1/runs/{a['id']}/effects/diff", params={"other": "run_missing"})
    assert response.status == 404


async def experiment(api, spec_id: str) -> dict:
    response, created = await api.post("/v1/experiments", json={"spec_id": spec_id, "replicas": 2})
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started
    deadline = asyncio.get_running_loop().time() + 300
    while True:
        _, body = await api.get(f"/v1/experiments/{created['id']}")
        if body["status"] in ("completed", "failed", "cancelled"):
            return body
        assert asyncio.get_running_loop().time() < deadline, body["status"]
        await asyncio.sleep(0.5)


@pytest.mark.timeout(600)
async def test_eval_compare_names_the_one_write_per_scenario(api, pair):
    baseline, candidate = await experiment(api, "effects-a"), await experiment(api, "effects-b")
    assert (baseline["status"], candidate["status"]) == ("completed", "completed"), (baseline, candidate)
    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": baseline["id"], "candidate_id": candidate["id"]})
    assert response.status == 200, result
    [scenario] = result["effects"]
    assert (len(scenario["baseline_runs"]), len(scenario["candidate_runs"])) == (2, 2)
    assert [(d["side"], d["key"], d["baseline"], d["candidate"]) for d in scenario["differences"]] == [
        ("between", "db orders insert", [None, None], [1, 1])]
    code, _, err = await svc_in_thread(api, "eval", "compare", baseline["id"], candidate["id"])
    assert code == 0, err
    assert "  effects:\n    scenario (no matrix):\n      - candidate inserted 1 row into orders, id=2 (baseline none)\n" in err


async def test_an_effect_rule_fails_the_run_that_wrote_past_it(api):
    doc = agent_spec("effects-rule", f"{BOTH} && {EXTRA}")
    doc["forbidden"] = {"effects": {"db": {"orders": {"insert": 0}, "logs": {"insert": "<= 3"}}, "http": {"api.example.test": {"POST": 0}}}}
    run = await run_spec(api, doc)
    assert run["status"] == "failed", run
    assert [v["message"] for v in run["violations"]] == ["1 row(s) (insert) on table 'orders'; the rule allows <= 0"]
