"""Portable baselines: `svc eval export --bundle` on one daemon, `svc eval compare --baseline FILE`
on a fresh one (its own home and store), with the deterministic scenario runner of
tests/support/experiments.py behind two real daemon apps."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.experiments import FakeRunner, run_experiment, start, upload
from tests.support.procs import svc_cli
from tests.support.specs import spec_yaml

ROOT = Path(__file__).resolve().parents[2]
# Ten scenarios x 3 replicas that all pass at baseline; the candidate (inputs mode odd) fails every
# replica whose seed is odd, about half of them.
SPEC = spec_yaml("gate", matrix=[{"n": n} for n in range(10)], replicas=3)
GOOD, WORSE = {"mode": "pass"}, {"mode": "odd"}


def same_answer(result: dict) -> dict:
    """What a comparison concludes, without the ids and times of the experiments compared."""
    keep = ("regressed", "metrics", "thresholds", "only_in_baseline", "only_in_candidate", "level")
    out = {k: result[k] for k in keep}
    out["regressions"] = [r for r in result["regressions"] if "wall_ms" not in r]  # wall time differs between any two runs
    out["changed_scenarios"] = [{k: v for k, v in c.items() if k not in ("baseline", "candidate", "replicas")}
                                for c in result["changed_scenarios"]]
    for m in out["metrics"]:
        for d in m["drivers"]:
            d.pop("baseline_scenario_id"), d.pop("candidate_scenario_id")
        if m["name"] in ("p95_wall_ms", "mean_wall_ms"):
            m.clear()
    return out


@pytest.fixture
async def first(aiohttp_client, tmp_path):
    return await start(aiohttp_client, tmp_path / "first", FakeRunner())


@pytest.fixture
async def fresh(aiohttp_client, tmp_path):
    return await start(aiohttp_client, tmp_path / "fresh", FakeRunner())


async def test_a_bundle_compared_on_a_fresh_daemon_answers_as_the_two_in_one_daemon(first, fresh, tmp_path):
    await upload(first, SPEC)
    baseline = await run_experiment(first, name="base", spec_id="gate", inputs=GOOD)
    candidate = await run_experiment(first, name="cand", spec_id="gate", seed="ci-7", inputs=WORSE)
    response, in_one = await first.post("/v1/experiments/compare", json={"baseline_id": baseline["id"], "candidate_id": candidate["id"]})
    assert response.status == 200, in_one
    code, _, err = await svc_cli(first, "eval", "export", baseline["id"], "--bundle", "-o", str(tmp_path / "base.json"),
                                 cwd=ROOT, home=tmp_path)
    assert code == 0, err

    await upload(fresh, SPEC)
    again = await run_experiment(fresh, name="cand", spec_id="gate", seed="ci-7", inputs=WORSE)
    code, out, err = await svc_cli(fresh, "eval", "compare", "--baseline", str(tmp_path / "base.json"), again["id"], "--gate",
                                   cwd=ROOT, home=tmp_path)
    from_file = json.loads(out)
    assert code == 1 and from_file["baseline_source"] == "bundle" and from_file["regressed"] is True
    assert same_answer(from_file) == same_answer(in_one)


async def test_a_bundle_of_another_spec_is_refused_naming_both_digests_unless_allowed(first, fresh, tmp_path):
    await upload(first, spec_yaml("gate"))
    baseline = await run_experiment(first, name="base", spec_id="gate")
    code, _, err = await svc_cli(first, "eval", "export", baseline["id"], "--bundle", "-o", str(tmp_path / "base.json"),
                                 cwd=ROOT, home=tmp_path)
    assert code == 0, err
    changed = await upload(fresh, spec_yaml("gate", replicas=2))
    candidate = await run_experiment(fresh, name="cand", spec_id="gate")
    bundle = json.loads((tmp_path / "base.json").read_text())
    code, _, refused = await svc_cli(fresh, "eval", "compare", "--baseline", str(tmp_path / "base.json"), candidate["id"],
                                     cwd=ROOT, home=tmp_path)
    code_allowed, out, _ = await svc_cli(fresh, "eval", "compare", "--baseline", str(tmp_path / "base.json"), candidate["id"],
                                         "--allow-spec-change", cwd=ROOT, home=tmp_path)
    assert code == 1 and bundle["spec"]["digest"] in refused and changed["sha256"] in refused and "--allow-spec-change" in refused
    assert code_allowed == 0 and json.loads(out)["baseline_source"] == "bundle"


async def test_an_imported_bundle_is_an_experiment_whose_views_and_comparisons_work(first, fresh, tmp_path):
    await upload(first, SPEC)
    baseline = await run_experiment(first, name="base", spec_id="gate", inputs=GOOD)
    code, _, err = await svc_cli(first, "eval", "export", baseline["id"], "--bundle", "-o", str(tmp_path / "base.json"),
                                 cwd=ROOT, home=tmp_path)
    assert code == 0, err
    code, out, err = await svc_cli(fresh, "eval", "import", str(tmp_path / "base.json"), cwd=ROOT, home=tmp_path)  # no spec there yet
    assert code == 0, err
    imported = json.loads(out)
    again = await run_experiment(fresh, name="cand", spec_id="gate", seed="ci-7", inputs=WORSE)
    response, by_id = await fresh.post("/v1/experiments/compare", json={"baseline_id": imported["id"], "candidate_id": again["id"]})
    _, by_file = await fresh.post("/v1/experiments/compare", json={"baseline_bundle": json.loads((tmp_path / "base.json").read_text()),
                                                                   "candidate_id": again["id"]})
    _, page = await fresh.get("/v1/scenarios", params={"experiment_id": imported["id"]})
    assert imported["imported"]["experiment_id"] == baseline["id"] and imported["id"] != baseline["id"]
    assert [s["verdict"] for s in imported["scenarios"]] == [s["verdict"] for s in baseline["scenarios"]] and len(page["items"]) == 10
    assert response.status == 200 and same_answer(by_id) == same_answer(by_file)
