"""The typed client (client/typed.py) answers with the contract's models, against the real daemon; the
launch screen's spec validation runs the daemon's loader in-process (file:line and YAML path)."""
from __future__ import annotations

from pathlib import Path

from client.results import RUN_VERDICTS, SCENARIO_VERDICTS, TERMINAL_EXPERIMENT_STATUSES, TERMINAL_RUN_STATUSES
from client.typed import TypedApi
from tests.support.tui import upload_spec
from tui.backend import validate_spec_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_typed_answers_are_contract_models(daemon, api):
    from daemon.contract.common import Page
    from daemon.contract.experiments import ExperimentRecord, RunResults
    from daemon.contract.sandboxes import Sandbox

    typed = TypedApi(api)
    assert (await typed.health()).status == "ok"
    await upload_spec(api, "alpha")
    created = await api.post("/v1/experiments", {"spec_id": "alpha", "name": "first"})
    page = await typed.list_experiments()
    assert isinstance(page, Page) and [type(x) for x in page.items] == [ExperimentRecord]
    assert page.items[0].name == "first" and page.items[0].status == "created"
    results = await typed.experiment(created["id"])
    assert isinstance(results, RunResults) and results.experiment_id == created["id"]
    assert results.status == "created" and results.total_runs >= 1
    sandboxes = await typed.list_sandboxes(status="all")
    assert all(isinstance(s, Sandbox) for s in sandboxes.items)


def test_spec_validation_names_line_and_path(tmp_path):
    assert validate_spec_file(EXAMPLES / "quickstart.yaml") == []
    issues = validate_spec_file(EXAMPLES / "broken.yaml")
    assert [(i.line, i.loc) for i in issues] == [(14, "agent.timout"), (20, "invariants.tests.check.type")]
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\nfoo: [\n")
    [issue] = validate_spec_file(bad)
    assert issue.line == 3 and issue.msg.startswith("invalid YAML")
    assert validate_spec_file(tmp_path / "missing.yaml")[0].msg.endswith("no such file")


def test_client_vocabularies_match_the_contract():
    import typing

    from daemon.contract.experiments import EXPERIMENT_STATUSES, ReplicaRun, ScenarioResult
    from daemon.contract.runs import RunStatus

    assert set(TERMINAL_EXPERIMENT_STATUSES) == set(EXPERIMENT_STATUSES) - {"created", "running"}
    assert set(TERMINAL_RUN_STATUSES) >= set(typing.get_args(RunStatus)) - {"queued", "running"}
    assert set(RUN_VERDICTS) == set(typing.get_args(typing.get_args(ReplicaRun.model_fields["verdict"].annotation)[0]))
    assert set(SCENARIO_VERDICTS) == set(typing.get_args(typing.get_args(ScenarioResult.model_fields["verdict"].annotation)[0]))
