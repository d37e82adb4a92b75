"""Effect bounds on real containers (daemon/scoring/forbidden/effects.py, daemon/scoring/checks/effects.py):
an agent that POSTs twice to the sandbox's recording HTTP mock breaks `forbidden.effects` (the run
fails naming the host and both counts) and writes two rows to `orders` past an `effects` invariant's
bound (the invariant fails naming the bound and the measured value); the same agent POSTing once and
writing one row passes both. Neither spec turns the HTTP or db audit on by itself: the bounds do."""
from __future__ import annotations

import pytest

from tests.support.runs import cli_spec, inv, result, run_spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

PSQL = 'psql -X -q -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL"'
SERVICES = [{"name": "db", "type": "postgres"},
            {"name": "pay", "type": "http_mock", "record": True,
             "routes": [{"method": "POST", "path": "/refunds", "response": {"status": 201, "body": {"ok": True}}}]}]
FIXTURES = [{"service": "db", "sql": "CREATE TABLE orders (id int PRIMARY KEY, status text)"}]
POST = 'curl -sf -X POST "$SERVICE_SERVICE_PAY_URL/refunds" -d "{}" > /dev/null'


def insert(order_id: int) -> str:
    return f"{PSQL} -c \"INSERT INTO orders VALUES ({order_id}, 'refunded')\""


def refund_spec(spec_id: str, times: int) -> dict:
    script = " && ".join([POST] * times + [insert(i) for i in range(1, times + 1)])
    return cli_spec(spec_id, script, {
        "one_refund_row": inv({"type": "effects", "db": {"orders": {"insert": "<= 1"}}}),
        "charged": inv({"type": "http_mock_assertions", "service": "pay",
                        "assertions": [{"method": "POST", "path": "/refunds", "min_count": 1}]}),
    }, services=SERVICES, fixtures=FIXTURES, forbidden={"effects": {"http": {"pay": {"POST": 1}}}})


@pytest.mark.timeout(300)
async def test_posting_twice_breaks_the_rule_and_the_invariant_naming_the_counts(api):
    run = await run_spec(api, refund_spec("effects-twice", 2))
    assert run["status"] == "failed", run
    assert [(v["rule"], v["message"]) for v in run["violations"]] == [
        ("effects", "2 POST call(s) to pay; the rule allows <= 1")]
    bound = result(run, "one_refund_row")
    assert bound["status"] == "failed" and bound["type"] == "effects", bound
    assert bound["evidence"]["message"] == "2 row(s) (insert) on table 'orders'; the bound is <= 1"
    assert [(b["table"], b["operation"], b["value"], b["bound"], b["holds"]) for b in bound["evidence"]["bounds"]] == [
        ("orders", "insert", 2, "<= 1", False)]
    assert result(run, "charged")["status"] == "passed"
    [violation] = run["violations"]
    assert {k: violation["event"][k] for k in ("host", "method", "value", "bound")} == {"host": "pay", "method": "POST", "value": 2, "bound": "<= 1"}


@pytest.mark.timeout(300)
async def test_posting_once_passes_both(api):
    run = await run_spec(api, refund_spec("effects-once", 1))
    assert run["status"] == "passed", run
    assert run["violations"] == []
    bound = result(run, "one_refund_row")
    assert (bound["status"], bound["evidence"]["message"]) == (
        "passed", "every effect bound holds: 1 row(s) (insert) on table 'orders'; the bound is <= 1")


@pytest.mark.timeout(300)
async def test_an_effects_invariant_counts_the_agents_writes_not_the_setups(api):
    """The setup writes a row and the agent writes none: `insert: 0` holds (the window is the agent's)."""
    doc = cli_spec("effects-window", "true", {"agent_wrote_nothing": inv({"type": "effects", "db": {"orders": {"insert": 0}}})},
                   services=SERVICES, fixtures=FIXTURES, setup={"commands": [insert(7)]})
    run = await run_spec(api, doc)
    bound = result(run, "agent_wrote_nothing")
    assert (run["status"], bound["evidence"]["bounds"][0]["value"]) == ("passed", 0), run
