"""`svc eval compare --gate` on small evals (issue 37), through the real CLI against a daemon app
whose scenario runner is the deterministic fake of tests/support/experiments.py: one scenario and
one replica that goes from passing to failing cannot be told from chance (exit 2, saying what would
decide it); with ten replicas each side the stratified test calls it (exit 1); equal experiments
pass (exit 0); a quarantined scenario is run and reported but not gated."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.experiments import FakeRunner, run_experiment, start, upload
from tests.support.procs import svc_cli
from tests.support.specs import spec_yaml

ROOT = Path(__file__).resolve().parents[2]
PASS, FAIL = {"mode": "pass"}, {"mode": "fail"}


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    return await start(aiohttp_client, tmp_path / "home", FakeRunner())


async def compare(api, tmp_path, *args: str) -> tuple[int, dict, str]:
    code, out, err = await svc_cli(api, "eval", "compare", *args, cwd=ROOT, home=tmp_path)
    return code, json.loads(out) if out.strip() else {}, err


async def test_one_scenario_one_replica_pass_to_fail_is_inconclusive_exit_2_with_what_would_decide_it(api, tmp_path):
    await upload(api, spec_yaml("one"))
    base = await run_experiment(api, name="base", spec_id="one", inputs=PASS)
    cand = await run_experiment(api, name="cand", spec_id="one", inputs=FAIL)
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate")
    assert code == 2, err
    assert result["decision"] == "inconclusive" and result["regressed"] is False
    line = next(x for x in err.splitlines() if x.startswith("svc: inconclusive"))
    assert "1 scenario, 1 replica each: p=0.5 > 0.05" in line and "run with --replicas 12" in line
    rate = next(m for m in result["metrics"] if m["name"] == "pass_rate")
    assert rate["test"].startswith("paired sign-flip") and "one replica per side" in rate["test_reason"]
    code, _, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate", "--allow-inconclusive")
    assert code == 0, err
    code, _, _ = await compare(api, tmp_path, base["id"], cand["id"])  # without --gate nothing fails
    assert code == 0


async def test_ten_replicas_each_side_pass_to_fail_is_regressed_exit_1_by_the_stratified_test(api, tmp_path):
    await upload(api, spec_yaml("ten", replicas=10))
    base = await run_experiment(api, name="base", spec_id="ten", inputs=PASS)
    cand = await run_experiment(api, name="cand", spec_id="ten", inputs=FAIL)
    md, junit = tmp_path / "gate.md", tmp_path / "gate.xml"
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate", "--allow-inconclusive",
                                      "--markdown", str(md), "--junit", str(junit))
    assert code == 1, err
    rate = next(m for m in result["metrics"] if m["name"] == "pass_rate")
    assert result["decision"] == "regressed" and rate["decision"] == "regressed"
    assert rate["p_value"] == round(1 / 184756, 6) and rate["test"].startswith("stratified exact test")
    assert [t["decided"] for t in rate["tests"]] == [False, True] and rate["tests"][0]["p_value"] == 0.5
    assert "stratified test over replicas over 1 scenarios" in err
    assert "gate: **regressed**" in md.read_text()
    assert '<property name="gate" value="regressed"' in junit.read_text()


async def test_two_equal_experiments_pass_the_gate_with_exit_0(api, tmp_path):
    await upload(api, spec_yaml("same", replicas=10))
    base = await run_experiment(api, name="base", spec_id="same", inputs=PASS)
    cand = await run_experiment(api, name="cand", spec_id="same", inputs=PASS)
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate")
    assert code == 0, err
    assert result["decision"] == "no_change" and "svc: no regression: no_change" in err


async def test_a_quarantined_scenario_is_run_and_reported_but_not_gated(api, tmp_path):
    # Scenario a passes whatever the inputs say; b follows the inputs, so it fails in the candidate.
    matrix = [{"case": "a", "mode": "pass"}, {"case": "b"}]
    await upload(api, spec_yaml("held", matrix=matrix, replicas=10, extra='quarantine: ["case=b"]'))
    await upload(api, spec_yaml("open", matrix=matrix, replicas=10))
    runs = {}
    for spec_id in ("held", "open"):
        runs[spec_id] = (await run_experiment(api, name="base", spec_id=spec_id, inputs=PASS),
                         await run_experiment(api, name="cand", spec_id=spec_id, inputs=FAIL))
    base, cand = runs["held"]
    assert [s["verdict"] for s in cand["scenarios"]] == ["pass", "fail"]  # run and reported
    md = tmp_path / "held.md"
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate", "--markdown", str(md))
    assert code == 0, err
    assert result["decision"] == "no_change" and result["quarantined"] == ["case=b"]
    assert "quarantined (reported, not gated): case=b" in err and "Quarantined (run and reported, not gated): `case=b`" in md.read_text()
    base, cand = runs["open"]
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate")
    assert code == 1 and result["decision"] == "regressed" and result["quarantined"] == []


# --- the sequential gate: --adaptive N [--max-cost USD] -------------------------------------------


async def test_adaptive_adds_replicas_to_both_sides_until_a_single_pass_to_fail_scenario_is_regressed(api, tmp_path):
    # 1/1 -> 0/1 cannot be told from chance; --adaptive 20 is 4 rounds of 5 runs and 5 looks at 0.05/5 = 0.01
    # each. Round 1 (+3 candidate, +2 baseline): 3/3 -> 0/4, p = 1/C(7,3) = 0.029, still open; round 2 (+2, +3):
    # 6/6 -> 0/6, p = 1/C(12,6) = 0.0011 <= 0.01: regressed after 10 runs.
    await upload(api, spec_yaml("one"))
    base = await run_experiment(api, name="base", spec_id="one", inputs=PASS)
    cand = await run_experiment(api, name="cand", spec_id="one", inputs=FAIL)
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate", "--adaptive", "20", "--poll", "20ms")
    assert code == 1, err
    adaptive = result["adaptive"]
    assert result["decision"] == "regressed" and adaptive["stopped"] == "decided"
    assert (adaptive["max_looks"], adaptive["looks"], adaptive["level_per_look"]) == (5, 3, 0.01)
    assert adaptive["added_by_side"] == {"candidate": 5, "baseline": 5} and adaptive["added_runs"] == 10
    assert [look["decision"] for look in adaptive["history"]] == ["inconclusive", "inconclusive", "regressed"]
    rate = next(m for m in result["metrics"] if m["name"] == "pass_rate")
    assert rate["p_value"] == round(1 / 924, 6) and result["level"] == 0.01
    # the fake runner records $0.002 a passing run and $0.004 a failing one: 5 x 0.002 + 5 x 0.004
    assert adaptive["cost_usd"] == 0.03
    assert "svc: --adaptive: 10 of 20 runs added (5 candidate, 5 baseline), $0.0300 spent, 3 of 5 looks" in err
    assert "stopped because the gate decided" in err
    after = [(await api.get(f"/v1/experiments/{x['id']}"))[1] for x in (base, cand)]
    assert [(x["total_runs"], x["scenarios"][0]["completed_runs"], x["scenarios"][0]["passed_runs"]) for x in after] == [(6, 6, 6), (6, 6, 0)]


async def test_adaptive_on_equal_sides_stops_at_once_on_no_change_and_a_cost_cap_stops_an_open_one(api, tmp_path):
    await upload(api, spec_yaml("one"))
    base = await run_experiment(api, name="base", spec_id="one", inputs=PASS)
    same = await run_experiment(api, name="same", spec_id="one", inputs=PASS)
    code, result, err = await compare(api, tmp_path, base["id"], same["id"], "--gate", "--adaptive", "20", "--poll", "20ms")
    assert code == 0, err
    assert result["decision"] == "no_change" and result["adaptive"]["added_runs"] == 0 and result["adaptive"]["looks"] == 1
    # An open comparison whose budget allows two runs at the recorded mean cost ($0.006 over 2 runs = $0.003 a run):
    # one round of 2 runs, then the budget is spent and the answer stays inconclusive (exit 2).
    cand = await run_experiment(api, name="cand", spec_id="one", inputs=FAIL)
    code, result, err = await compare(api, tmp_path, base["id"], cand["id"], "--gate", "--adaptive", "20", "--max-cost", "0.007",
                                      "--poll", "20ms")
    assert code == 2, err
    adaptive = result["adaptive"]
    assert result["decision"] == "inconclusive" and adaptive["stopped"] == "cost" and adaptive["added_runs"] == 2
    assert adaptive["cost_usd"] == 0.006 and "of $0.007 spent" in err and "stopped because the cost budget was reached" in err


async def test_adaptive_with_a_baseline_bundle_extends_the_candidate_only(api, tmp_path):
    await upload(api, spec_yaml("ten", replicas=3))
    base = await run_experiment(api, name="base", spec_id="ten", inputs=PASS)
    cand = await run_experiment(api, name="cand", spec_id="ten", inputs=FAIL)
    bundle = tmp_path / "base.json"
    code, _, err = await svc_cli(api, "eval", "export", base["id"], "--bundle", "-o", str(bundle), cwd=ROOT, home=tmp_path)
    assert code == 0, err
    # 3/3 -> 0/3: p = 1/20 > 0.05/5; the candidate alone gets runs: 3/3 -> 0/n has p = C(n, 0)C(3, 3)/C(n+3, 3).
    code, result, err = await compare(api, tmp_path, cand["id"], "--baseline", str(bundle), "--gate", "--adaptive", "8",
                                      "--poll", "20ms")
    assert code == 1, err
    assert result["adaptive"]["added_by_side"] == {"candidate": 4} and result["decision"] == "regressed"  # 0/7: p = 1/120


async def test_max_cost_needs_adaptive(api, tmp_path):
    code, _, err = await compare(api, tmp_path, "a", "b", "--max-cost", "1")
    assert code != 0 and "--max-cost bounds the runs --adaptive N adds" in err


async def test_the_mcp_compare_tool_takes_adaptive_and_max_cost(api, tmp_path):
    from mcp.shared.memory import create_connected_server_and_client_session

    from client.api import Client
    from client.config import ClientConfig
    from client.mcp_server import build_server

    await upload(api, spec_yaml("one"))
    base = await run_experiment(api, name="base", spec_id="one", inputs=PASS)
    cand = await run_experiment(api, name="cand", spec_id="one", inputs=FAIL)
    client = Client(ClientConfig(base_url=api.base_url(), api_key=api.key, timeout=10.0, home=tmp_path, api_key_source="test"))
    async with create_connected_server_and_client_session(build_server(client)) as session:
        answer = await session.call_tool("svc_eval_compare", {"baseline_id": base["id"], "candidate_id": cand["id"], "gate": True,
                                                              "adaptive": 20, "max_cost": 1.0})
        assert not answer.isError, answer.content
        result = json.loads(answer.content[0].text)
        assert (result["decision"], result["gate_exit_code"], result["adaptive"]["added_runs"]) == ("regressed", 1, 10)
        refused = await session.call_tool("svc_eval_compare", {"baseline_id": base["id"], "candidate_id": cand["id"], "max_cost": 1.0})
        assert refused.isError and "give adaptive too" in refused.content[0].text
    await client.close()
