"""`svc logs scenarios|export` (and their `svc eval` spellings) as real subprocesses against the
in-process daemon running experiments with the deterministic scenario runner."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.experiments import FakeRunner, run_experiment, start, upload
from tests.support.procs import ROOT, svc_cli
from tests.support.specs import spec_yaml


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    return await start(aiohttp_client, tmp_path / "home", FakeRunner())


@pytest.fixture
async def experiment(api):
    spec = await upload(api, spec_yaml("mixed", matrix=[{"mode": "pass"}, {"mode": "fail"}]))
    return await run_experiment(api, name="mixed", spec_id=spec["id"])


async def svc(api, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    # PYTHONPATH: the checkout, not the copy installed in the venv, whatever the working directory
    return await svc_cli(api, *args, cwd=tmp_path, home=tmp_path, SERVICE_NO_AUTO_UPDATE="1", PYTHONPATH=str(ROOT))


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


async def test_logs_scenarios_filters_by_status(api, tmp_path, experiment):
    code, out, err = await svc(api, tmp_path, "logs", "scenarios", "--experiment", experiment["id"], "--status", "failed")
    assert code == 0, err
    assert [s["matrix_entry"] for s in ndjson(out)] == [{"mode": "fail"}]


async def test_logs_scenarios_writes_a_json_array_to_a_file(api, tmp_path, experiment):
    target = tmp_path / "scenarios.json"
    code, _, err = await svc(api, tmp_path, "logs", "scenarios", "--experiment", experiment["id"], "--format", "json", "-o", str(target))
    assert code == 0, err
    assert len(json.loads(target.read_text())) == 2


async def test_eval_scenarios_is_the_same_listing(api, tmp_path, experiment):
    _, logs_out, _ = await svc(api, tmp_path, "logs", "scenarios", "--experiment", experiment["id"])
    _, eval_out, _ = await svc(api, tmp_path, "eval", "scenarios", "--experiment", experiment["id"])
    assert ndjson(logs_out) == ndjson(eval_out)


async def test_logs_scenarios_requires_the_experiment(api, tmp_path):
    code, _, err = await svc(api, tmp_path, "logs", "scenarios")
    assert code == 1 and "--experiment" in err


async def test_logs_export_writes_the_bundle(api, tmp_path, experiment):
    target = tmp_path / "bundle.json"
    code, _, err = await svc(api, tmp_path, "logs", "export", experiment["id"], "-o", str(target))
    assert code == 0, err
    assert json.loads(target.read_text())["experiment"]["id"] == experiment["id"]


async def test_logs_export_of_an_unknown_experiment_is_one_line(api, tmp_path):
    code, _, err = await svc(api, tmp_path, "logs", "export", "exp-nope")
    assert code == 1 and err.startswith("svc: 404 not_found")


async def test_logs_scores_lists_an_experiments_scores_for_one_rule(api, tmp_path):
    from tests.support.scores import add_llm_spans, create_rule, finished_experiment, score

    experiment = await finished_experiment(api, replicas=2, spec_id="scored")
    await add_llm_spans(api, experiment["id"], ["a refund was issued", "no luck"])
    rule = await create_rule(api, name="refunds", type="regex", pattern=r"refund", applies_to={"event_type": "llm_call"})
    await create_rule(api, name="other", type="regex", pattern=r"luck", applies_to={"event_type": "llm_call"})
    await score(api, experiment["id"])
    code, out, err = await svc(api, tmp_path, "logs", "scores", "--experiment", experiment["id"], "--rule", rule["id"])
    assert code == 0, err
    assert sorted((row["span_id"], row["passed"]) for row in ndjson(out)) == [("span_llm_0", True), ("span_llm_1", False)]
