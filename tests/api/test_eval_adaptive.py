"""`svc eval run --adaptive N`: more replicas only for the scenarios whose verdict is still
undecided (flaky), through the real CLI and a real daemon app (the deterministic scenario runner
of tests/support/experiments.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.experiments import base_seed_for, start
from tests.support.procs import svc_cli
from tests.support.specs import spec_yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


async def test_adaptive_spends_its_runs_on_the_undecided_scenario_only(api, runner, tmp_path):
    spec = tmp_path / "mixed.yaml"
    spec.write_text(spec_yaml("mixed", matrix=[{"mode": "pass"}, {"mode": "odd"}], replicas=2))
    code, out, err = await svc_cli(api, "eval", "run", str(spec), "--poll", "50ms", "--seed", base_seed_for([False, True], 1),
                                   "--adaptive", "4", cwd=ROOT, home=tmp_path)
    results = json.loads(out)
    solid, undecided = results["scenarios"]
    assert "--adaptive: spent 4 of 4 runs on 1 undecided scenario(s)" in err and results["status"] == "completed"
    assert (solid["replicas"], undecided["replicas"], results["total_runs"]) == (2, 6, 8)
    assert [r["index"] for r in undecided["runs"]] == [0, 1, 2, 3, 4, 5] and undecided["completed_runs"] == 6
