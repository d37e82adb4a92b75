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
