"""`svc spec check`: a run that errored (a boot or engine failure) runs once more with its seed, so
one infrastructure hiccup does not take a check's evidence away; the error's reason is reported.
The client logic is driven against a stand-in for the three API calls it makes (the real daemon's
runs cannot be made to error once on demand; tests/docker/test_spec_check.py runs the real thing)."""
from __future__ import annotations

import asyncio
import itertools
from typing import Any

import yaml

from client.commands.spec_check import check_spec, render
from client.routes import R

SPEC = {"version": 1, "id": "checked", "base": "localhost/svc/python:3.11", "task": {"prompt": "p"},
        "agent": {"type": "cli", "binary": "false"},
        "invariants": {"answered": {"check": {"type": "file_exists", "path": "answer.txt"}}}}


class RunsStandIn:
    """Answers UPLOAD_SPEC, CREATE_RUN and GET_RUN; the first oracle run of seed spec-check-0 errors."""

    def __init__(self) -> None:
        self.ids = (f"run_{i:02d}" for i in itertools.count())
        self.runs: dict[str, dict[str, Any]] = {}
        self.created: list[tuple[str, str]] = []

    async def call(self, route, *, body: Any = None, run_id: str | None = None, **_: Any) -> dict[str, Any]:
        if route is R.UPLOAD_SPEC:
            return {"id": yaml.safe_load(body["yaml"])["id"], "version": 1}
        if route is R.CREATE_RUN:
            role = body["spec_id"].rsplit("-", 1)[-1]
            run_id = next(self.ids)
            first = (role, body["seed"]) not in self.created
            self.created.append((role, body["seed"]))
            if role == "oracle" and body["seed"] == "spec-check-0" and first:
                self.runs[run_id] = {"id": run_id, "status": "errored",
                                     "error": {"step": "boot", "code": "boot_failed", "message": "boot timed out after 60s"}}
            else:
                passed = role == "oracle"
                self.runs[run_id] = {"id": run_id, "status": "passed" if passed else "failed", "invariant_results": [
                    {"invariant_id": "answered", "status": "passed" if passed else "failed"}]}
            return {"id": run_id}
        if route is R.GET_RUN:
            return self.runs[run_id]
        raise AssertionError(f"unexpected call {route}")


def test_an_errored_oracle_run_runs_again_and_its_reason_is_reported(tmp_path):
    spec = tmp_path / "checked.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    api = RunsStandIn()
    report = asyncio.run(check_spec(api, str(spec), "seed-oracle", 2))  # type: ignore[arg-type]
    assert (report["ok"], [c["verdict"] for c in report["checks"]], report["errors"], report["rerun"],
            report["errored_runs"]) == \
        (True, ["ok"], {"run_00": "boot: boot timed out after 60s"}, {"oracle": ["run_04"], "noop": []},
         {"oracle": [], "noop": []}), report
    assert "run_00 errored: boot: boot timed out after 60s" in render(report)
