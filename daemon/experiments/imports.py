"""Bring a baseline bundle (`svc eval export --bundle`) into this daemon as a finished experiment.

The experiment gets a new id, status ``completed`` and ``imported`` (where it came from); its
scenarios and replica runs keep their matrix entries, seeds, verdicts, scores, invariant results,
wall times, costs and retried attempts, so every view (RunResults, scenarios, metrics, history,
reports) and comparison works on it as on one run here. The spec comes along: the version of the
tenant's spec with the same digest when there is one, else a new version from the bundle's YAML.
Run rows, trajectories and sandboxes are not brought (the runs happened elsewhere), and the runs
get new ids (the exported ones are kept as ``imported_run_id``): a bundle is the tenant's own
input, and an id it names could be another tenant's run here, whose traces and trajectory must
never be joined to it (tests/security/test_import_ids.py).

The body was validated whole by its model (daemon/contract/bundles.py: every key read here has its
type) before this runs, and everything is written in one transaction, so a bundle is either imported
whole or answered 400 naming the field, never stored half or mistyped (tests/security/test_import_hostile.py).
"""
from __future__ import annotations

import hashlib
from typing import Any

from daemon.contract.experiments import MetricsSummary
from daemon.errors import InvalidRequest
from daemon.experiments import seeds
from daemon.store import imports as import_store
from daemon.store import specs as spec_store
from daemon.util import now_iso

RUN_STATUSES = ("passed", "failed", "errored")


def _bad(loc: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{loc}: {message}", [{"loc": loc, "msg": message}])


async def spec_version_for(store: Any, tenant_id: str, spec: dict[str, Any], quotas: dict[str, int | None]) -> int:
    """The tenant's version of the bundle's spec (same digest), made from its YAML when missing."""
    for version in await spec_store.versions(store, tenant_id, spec["id"]) if await spec_store.get(store, tenant_id, spec["id"]) else []:
        if version["sha256"] == spec["digest"]:
            return version["version"]
    yaml_text = spec.get("yaml")
    if not yaml_text:
        raise _bad("body.spec.yaml", f"this daemon has no version of spec '{spec['id']}' with digest {spec['digest']} and the bundle "
                   "carries no YAML to create it")
    if hashlib.sha256(yaml_text.encode()).hexdigest() != spec["digest"].removeprefix("sha256:"):
        raise _bad("body.spec.yaml", f"the YAML's sha256 is not the bundle's spec digest {spec['digest']}: the bundle was altered")
    from daemon.spec import SpecValidationError, load_spec

    try:
        load_spec(yaml_text, f"{spec['id']}.yaml")
    except SpecValidationError as exc:
        raise _bad("body.spec.yaml", f"not a valid spec here: {str(exc).splitlines()[0]}")
    record = await spec_store.save_version(store, tenant_id, spec["id"], spec["id"], yaml_text, **quotas)
    return record["version"]


async def import_bundle(store: Any, tenant_id: str, bundle: dict[str, Any], quotas: dict[str, int | None] | None = None) -> str:
    """Write the bundle's experiment; returns the new experiment id."""
    results = bundle["experiment"]
    for key in ("id", "name", "status", "scenarios", "metrics", "created_at"):
        if results.get(key) is None:
            raise _bad(f"body.experiment.{key}", "field required (the bundle is not an exported RunResults)")
    if results["status"] != "completed":
        raise _bad("body.experiment.status", f"only a completed experiment can be imported, this one is {results['status']}")
    spec_version = await spec_version_for(store, tenant_id, bundle["spec"], quotas or {})
    experiment_id = seeds.experiment_id()
    scenarios, jobs = [], []
    for i, s in enumerate(results["scenarios"]):
        loc = f"body.experiment.scenarios[{i}]"
        if not isinstance(s, dict) or not isinstance(s.get("runs"), list):
            raise _bad(f"{loc}.runs", "a list of replica runs is required")
        scenario_id = seeds.scenario_id()
        matrix_index = i if s.get("index") is None else s["index"]
        scenarios.append({"id": scenario_id, "matrix_index": matrix_index, "matrix_entry": s.get("matrix_entry") or {},
                          "replicas": s.get("replicas") or len(s["runs"]), "status": s.get("status") or s.get("verdict"),
                          "verdict": s.get("verdict"), "passed": None if s.get("passed") is None else int(bool(s["passed"])),
                          "score": s.get("score"), "finished_at": s.get("finished_at")})
        for k, r in enumerate(s["runs"]):
            status = r.get("status")
            if status not in RUN_STATUSES:
                raise _bad(f"{loc}.runs[{k}].status", f"expected one of {', '.join(RUN_STATUSES)}, got {status!r}")
            jobs.append({"id": seeds.job_id(), "scenario_id": scenario_id, "matrix_index": matrix_index,
                         "replica_index": k if r.get("index") is None else r["index"], "seed": str(r.get("seed") or ""), "run_id": seeds.run_id(),
                         "previous_run_ids": r.get("previous_run_ids") or [], "attempts": r.get("attempts") or 1, "status": status,
                         "score": r.get("score"), "error": r.get("error"),
                         "result": {"invariant_results": r.get("invariant_results") or [], "duration_ms": r.get("duration_ms"),
                                    "reason": r.get("reason"), "reproducer": r.get("reproducer"), "imported_run_id": r.get("run_id")},
                         "wall_ms": r.get("wall_ms"), "cost_usd": r.get("cost_usd"), "started_at": r.get("started_at"),
                         "finished_at": r.get("finished_at")})
    # the MetricsSummary keys only: the others are recomputed on read, and a key the record does not declare fails it
    summary = {k: results["metrics"][k] for k in MetricsSummary.model_fields}
    experiment = {"id": experiment_id, "tenant_id": tenant_id, "name": results["name"], "spec_id": bundle["spec"]["id"],
                  "spec_version": spec_version, "replicas": results.get("replicas") or 1, "matrix": results.get("matrix") or [],
                  "base_seed": results.get("seed") or "", "total_runs": len(jobs), "summary": summary,
                  "created_at": results["created_at"], "started_at": results.get("started_at"),
                  "finished_at": results.get("finished_at") or now_iso(),
                  "imported": {"experiment_id": results["id"], "exported_at": bundle["exported_at"], "spec_digest": bundle["spec"]["digest"]}}
    await import_store.insert_imported(store, experiment, scenarios, jobs)
    return experiment_id
