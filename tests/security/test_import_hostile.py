"""Attack: a tenant imports a baseline bundle (POST /v1/experiments/import) whose fields have the wrong
JSON type or shape (a string for a list, a number for a string, null for a required value, runs that
are not objects, ids that are paths...), hoping for a 500, and for an experiment stored half or
mistyped that then fails every read (the list, its RunResults, its metrics) for good.

The whole body is checked by its model (daemon/contract/bundles.py) before anything is written:
each variant is a 400 naming the field, and afterwards every experiment the tenant lists reads 200."""
from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from tests.support.specs import spec_yaml

YAML = spec_yaml("imported-hostile")
DIGEST = "sha256:" + hashlib.sha256(YAML.encode()).hexdigest()

RUN = {"index": 0, "seed": "seed-0", "run_id": "run_exported0", "status": "passed", "verdict": "pass", "score": 1.0,
       "invariant_results": [{"invariant_id": "ok", "name": "ok", "status": "passed", "score": 1.0}], "duration_ms": 12,
       "wall_ms": 20, "cost_usd": 0.01, "error": None, "reason": None, "attempts": 1, "previous_run_ids": [],
       "trace_ids": [], "trajectory_url": None, "reproducer": {"command": "svc runs create x", "inputs": {}, "pins": None},
       "started_at": "2026-11-25T00:00:00Z", "finished_at": "2026-11-25T00:00:01Z"}
METRICS = {"total_runs": 1, "passed_runs": 1, "failed_runs": 0, "errored_runs": 0, "pass_rate": 1.0, "pass_rate_ci": [0.2, 1.0],
           "total_cost_usd": 0.01, "mean_cost_per_run_usd": 0.01, "mean_wall_ms": 20.0, "p95_wall_ms": 20.0, "total_tool_calls": 0,
           "mean_tool_calls": 0.0, "tool_success_rate": None, "side_effect_violations": 0, "verdicts": {"pass": 1}, "scenarios": 1,
           "scenarios_passed": 1, "all_passed": True, "pass_at_k": {"1": 1.0}, "pass_hat_k": {"1": 1.0}, "retried_runs": 0}
BUNDLE: dict[str, Any] = {
    "format": "svc-baseline-bundle", "version": 1, "exported_at": "2026-11-26T00:00:00Z",
    "spec": {"id": "imported-hostile", "version": 1, "digest": DIGEST, "yaml": YAML},
    "experiment": {"id": "exp_exported0", "name": "baseline", "status": "completed", "created_at": "2026-11-25T00:00:00Z",
                   "started_at": "2026-11-25T00:00:00Z", "finished_at": "2026-11-25T00:00:02Z", "replicas": 1, "matrix": [{"mode": "pass"}],
                   "seed": "base", "metrics": METRICS,
                   "scenarios": [{"index": 0, "matrix_entry": {"mode": "pass"}, "replicas": 1, "status": "pass", "verdict": "pass",
                                  "passed": True, "score": 1.0, "finished_at": "2026-11-25T00:00:02Z", "runs": [RUN]}]},
}
EXP = ("experiment",)
SCN = ("experiment", "scenarios", 0)
RUN0 = (*SCN, "runs", 0)

# (path of the field, the hostile value): every field of the body given the wrong type or shape
VARIANTS = [
    (EXP + ("name",), 42),                              # a number for a string
    (EXP + ("created_at",), None),                      # null for a required string
    (EXP + ("id",), {"id": "exp_1"}),                   # an object for an id
    (EXP + ("id",), "../../exp_other"),                 # an id with the wrong shape
    (EXP + ("metrics",), []),                           # a list for an object
    (EXP + ("metrics", "pass_rate"), "high"),           # a string for a number
    (EXP + ("metrics", "total_runs"), True),            # a boolean for a number
    (EXP + ("metrics", "side_effect_violations"), None),
    (EXP + ("scenarios",), "all"),                      # a string for a list
    (EXP + ("matrix",), "mode=pass"),
    (EXP + ("seed",), 7),
    (EXP + ("replicas",), "3"),
    (EXP + ("started_at",), 1764028800),
    (SCN + ("matrix_entry",), "mode=pass"),
    (SCN + ("index",), "0"),
    (SCN + ("passed",), "yes"),
    (SCN + ("runs",), None),
    (SCN + ("replicas",), 1.5),
    (RUN0, "run"),                                      # a string for a run object
    (RUN0 + ("status",), None),
    (RUN0 + ("score",), "good"),
    (RUN0 + ("attempts",), "2"),
    (RUN0 + ("previous_run_ids",), "run_1"),            # a string for a list
    (RUN0 + ("previous_run_ids",), [7]),
    (RUN0 + ("run_id",), "../runs/victim"),
    (RUN0 + ("seed",), ["s"]),
    (RUN0 + ("wall_ms",), "slow"),
    (RUN0 + ("cost_usd",), "cheap"),
    (RUN0 + ("error",), {"message": "x"}),
    (RUN0 + ("invariant_results",), "ok"),
    (RUN0 + ("invariant_results", 0, "name"), 5),
    (RUN0 + ("reproducer",), "svc runs create"),
    (RUN0 + ("reproducer", "command"), 5),
    (("spec", "id"), "../../etc"),
    (("spec", "version"), "1"),
    (("spec", "digest"), 5),
    (("exported_at",), None),
]


def mutate(path: tuple, value: Any) -> dict[str, Any]:
    bundle = copy.deepcopy(BUNDLE)
    target: Any = bundle
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return bundle


async def test_the_untouched_bundle_imports(api):
    response, imported = await api.post("/v1/experiments/import", json=BUNDLE)
    assert response.status == 201, imported
    assert imported["imported"]["experiment_id"] == "exp_exported0" and imported["scenarios"][0]["runs"][0]["status"] == "passed"


@pytest.mark.parametrize("path, value", VARIANTS, ids=[".".join(map(str, p)) + "=" + repr(v)[:20] for p, v in VARIANTS])
async def test_a_mistyped_field_is_a_400_naming_it_and_nothing_is_stored(api, path, value):
    response, body = await api.post("/v1/experiments/import", json=mutate(path, value))
    field = ".".join(map(str, path))
    assert response.status == 400, body
    assert body["error"] == "invalid_request" and any(e["loc"].removeprefix("body.").startswith(field) for e in body["details"]["errors"]), body
    assert field in body["message"], body
    _, listed = await api.get("/v1/experiments")
    assert listed["items"] == [], listed  # nothing half-imported
    _, specs = await api.get("/v1/specs")
    assert specs["items"] == [], specs  # not even the bundle's spec


async def test_after_every_hostile_import_every_listed_experiment_reads(api):
    response, good = await api.post("/v1/experiments/import", json=BUNDLE)
    assert response.status == 201, good
    for path, value in VARIANTS:
        response, body = await api.post("/v1/experiments/import", json=mutate(path, value))
        assert response.status == 400, (path, body)
    response, listed = await api.get("/v1/experiments")
    assert response.status == 200 and [e["id"] for e in listed["items"]] == [good["id"]], listed
    for experiment in listed["items"]:
        for path in (f"/v1/experiments/{experiment['id']}", f"/v1/scenarios?experiment_id={experiment['id']}",
                     f"/v1/metrics/experiments/{experiment['id']}", f"/v1/experiments/{experiment['id']}/export"):
            response, body = await api.get(path)
            assert response.status == 200, (path, body)


async def test_a_mistyped_bundle_given_to_compare_is_a_400_too(api):
    """The same model reads the bundle a comparison is given (not imported)."""
    response, good = await api.post("/v1/experiments/import", json=BUNDLE)
    assert response.status == 201, good
    for path, value in [(EXP + ("metrics",), []), (RUN0, "run"), (SCN + ("runs",), None)]:
        response, body = await api.post("/v1/experiments/compare", json={"baseline_bundle": mutate(path, value),
                                                                         "candidate_id": good["id"]})
        field = "baseline_bundle." + ".".join(map(str, path))
        assert response.status == 400 and field in body["message"], (path, body)
