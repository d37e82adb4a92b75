"""Replica suites and experiments through the real app, store and scheduler, in-process.

The scenario function is the scheduler's seam (`app[RUN_SCENARIO]`, daemon.appkeys): a tiny
deterministic runner whose behaviour comes from the matrix entry / inputs `mode`:
pass, fail, odd (fails on odd seeds), error, block (until released or cancelled), capacity (at
capacity once, then passes). The real Docker runner is exercised in tests/docker/test_experiments.py.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from daemon.experiments import service as service_mod
from daemon.experiments.seeds import derive_seed
from tests.support.api import Api
from tests.support.experiments import (
    base_seed_for,
    odd,
    run_experiment,
    start,
    upload,
    wait_done,
)
from tests.support.specs import spec_yaml
from tests.support.sse import sse_data
from daemon.appkeys import STORE


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner) -> Api:
    return await start(aiohttp_client, tmp_path / "home", runner)


# --- replica suites ------------------------------------------------------------------------------------


async def test_replica_suite_validation_404_and_403(api, other_tenant_key):
    await upload(api, spec_yaml())
    for n in (1, 1001, 0):
        response, body = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": n})
        assert response.status == 400, body
        assert body["error"] == "invalid_request" and "n_replicas" in body["message"]
        assert body["details"]["errors"][0]["loc"] == "n_replicas"
    response, body = await api.post("/v1/replicas", json={"spec_id": "demo"})
    assert response.status == 400 and "n_replicas" in body["message"]
    response, body = await api.post("/v1/replicas", json={"spec_id": "nope", "n_replicas": 2})
    assert response.status == 404 and body["details"] == {"resource": "spec", "id": "nope"}
    response, body = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 2}, key=other_tenant_key)
    assert response.status == 404 and body["error"] == "not_found"  # spec ids are per tenant
    response, suite = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 2})
    response, body = await api.get(f"/v1/replicas/{suite['id']}", key=other_tenant_key)
    assert response.status == 403
    response, body = await api.get("/v1/replicas/rep_missing")
    assert response.status == 404


async def test_replica_suite_flaky_agent_seeds_stream_and_counts(api, runner):
    await upload(api, spec_yaml())
    response, suite = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 8, "inputs": {"mode": "odd"}},
                                     headers={"Idempotency-Key": "suite-1"})
    assert response.status == 202, suite
    assert suite["status"] == "running" and suite["n_replicas"] == 8 and len(set(suite["seeds"])) == 8
    assert all(s.startswith("seed_") for s in suite["seeds"]) and suite["run_id"].startswith("run_")
    # Idempotency-Key: the same request returns the same suite and runs nothing new.
    response, again = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 8, "inputs": {"mode": "odd"}},
                                     headers={"Idempotency-Key": "suite-1"})
    assert again["id"] == suite["id"]

    response = await api.client.get(f"/v1/replicas/{suite['id']}/stream", headers=api.headers())
    assert response.status == 200 and response.headers["Content-Type"] == "text/event-stream"
    events = sse_data(await response.text())
    replicas, done = events[:-1], events[-1]
    assert [e["type"] for e in replicas] == ["replica"] * 8 and done["type"] == "done"
    assert sorted(e["index"] for e in replicas) == list(range(8))
    for e in replicas:
        assert e["seed"] == suite["seeds"][e["index"]]
        assert e["status"] == ("failed" if odd(e["seed"]) else "passed")
        assert set(e) == {"type", "index", "seed", "run_id", "status", "score", "duration_ms"}
    expected_failed = sum(odd(s) for s in suite["seeds"])
    final = done["suite"]
    assert final["status"] == "complete"
    assert (final["passed"], final["failed"], final["errored"]) == (8 - expected_failed, expected_failed, 0)
    assert final["failure_rate"] == pytest.approx(expected_failed / 8, abs=1e-6)
    assert final["verdict"] == ("flaky" if 0 < expected_failed < 8 else "pass" if not expected_failed else "fail")
    lo, hi = final["pass_rate_ci"]
    assert lo <= (8 - expected_failed) / 8 <= hi
    # A late subscriber gets the whole history replayed; GET agrees.
    response = await api.client.get(f"/v1/replicas/{suite['id']}/stream", headers=api.headers())
    assert len(sse_data(await response.text())) == 9
    response, got = await api.get(f"/v1/replicas/{suite['id']}")
    assert got["passed"] == final["passed"] and got["status"] == "complete"
    # Each replica ran with its own seed, which is what run creation takes to reproduce it.
    assert sorted(c["seed"] for c in runner.calls) == sorted(suite["seeds"])
    assert all(c["inputs"] == {"mode": "odd"} for c in runner.calls)


# --- experiments -------------------------------------------------------------------------------------------


async def test_matrix_of_three_entries_times_two_replicas(api, runner):
    matrix = [{"mode": "pass", "model": "small"}, {"mode": "fail", "model": "large"}, {"mode": "odd", "model": "medium"}]
    await upload(api, spec_yaml(matrix=matrix, replicas=2))
    base = base_seed_for([False, True], matrix_index=2)  # entry 2: one even (pass), one odd (fail) seed
    results = await run_experiment(api, name="grid", spec_id="demo", seed=base)
    assert results["status"] == "completed" and results["total_runs"] == 6 and results["completed_runs"] == 6
    assert [s["matrix_entry"] for s in results["scenarios"]] == matrix
    assert [s["verdict"] for s in results["scenarios"]] == ["pass", "fail", "flaky"]
    assert [s["passed"] for s in results["scenarios"]] == [True, False, False]  # majority of 2 needs both
    assert results["metrics"]["verdicts"] == {"pass": 1, "fail": 1, "flaky": 1, "error": 0}
    assert results["metrics"]["total_runs"] == 6 and results["metrics"]["passed_runs"] == 3
    assert results["metrics"]["pass_rate"] == 0.5 and len(results["metrics"]["pass_rate_ci"]) == 2
    assert results["metrics"]["total_cost_usd"] == pytest.approx(3 * 0.002 + 3 * 0.004)
    # Six runs, each matrix entry twice, with the derived seeds, ids and the right parameters.
    assert len(runner.calls) == 6
    for scenario in results["scenarios"]:
        calls = [c for c in runner.calls if c["scenario_id"] == scenario["id"]]
        assert len(calls) == 2 and all(c["matrix_entry"] == scenario["matrix_entry"] for c in calls)
        assert sorted(c["seed"] for c in calls) == sorted(scenario["seeds"])
        assert scenario["seeds"] == [derive_seed(base, scenario["index"], r) for r in range(2)]
        assert all(c["experiment_id"] == results["id"] for c in calls)
        for run in scenario["runs"]:
            assert run["reproducer"]["seed"] == run["seed"] and run["reproducer"]["matrix_entry"] == scenario["matrix_entry"]
            assert f"--seed {run['seed']}" in run["reproducer"]["command"]
        assert scenario["reproducer"]["command"]
        assert scenario["trace_ids"] == sorted(f"trace-{rid}" for rid in scenario["run_ids"])
        assert scenario["invariant_scores"]["ok"] == pytest.approx(scenario["passed_runs"] / 2)
    flaky = results["scenarios"][2]
    assert flaky["reproducer"]["seed"] == derive_seed(base, 2, 1)  # points at the failing replica


async def test_strategies_decide_passed_for_the_same_flaky_replicas(api):
    base = base_seed_for([False, True, False])  # pass, fail, pass
    expected = {"majority": True, "all_must_pass": False}
    for strategy, passed in expected.items():
        await upload(api, spec_yaml(f"s-{strategy.replace('_', '-')}", strategy=strategy, matrix=[{"mode": "odd"}], replicas=3))
        results = await run_experiment(api, spec_id=f"s-{strategy.replace('_', '-')}", seed=base)
        scenario = results["scenarios"][0]
        assert scenario["verdict"] == "flaky" and scenario["passed"] is passed
        assert (scenario["passed_runs"], scenario["failed_runs"]) == (2, 1)
        assert results["aggregation"]["strategy"] == strategy
    await upload(api, spec_yaml("s-pct", strategy="percentage\n    min_pass_rate: 0.9", matrix=[{"mode": "odd"}], replicas=3))
    results = await run_experiment(api, spec_id="s-pct", seed=base)
    assert results["scenarios"][0]["verdict"] == "flaky" and results["scenarios"][0]["passed"] is False


async def test_create_validation_404_403_and_overrides(api, other_tenant_key):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "fail"}], replicas=3))
    response, body = await api.post("/v1/experiments", json={"name": "x", "spec_id": "missing"})
    assert response.status == 404 and body["details"]["resource"] == "spec"
    response, body = await api.post("/v1/experiments", json={"name": "x", "spec_id": "demo"}, key=other_tenant_key)
    assert response.status == 404  # spec ids are per tenant: the other tenant has no "demo"
    response, body = await api.post("/v1/experiments", json={"name": "x", "spec_id": "demo", "replicas": 0})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "replicas"
    response, body = await api.post("/v1/experiments", json={"name": "x", "spec_id": "demo", "matrix": [{}]})
    assert response.status == 400 and "matrix.0" in body["message"]
    response, body = await api.post("/v1/experiments", json={"name": "x", "spec_id": "demo", "bogus": 1})
    assert response.status == 400 and "bogus" in body["message"]
    response, body = await api.post("/v1/experiments", json={"name": "x", "spec_id": "demo", "replicas": 1000, "matrix": [{"a": i} for i in range(11)]})
    assert response.status == 400 and "10000" in body["message"]
    response, created = await api.post("/v1/experiments", json={"spec_id": "demo"})
    assert response.status == 201
    assert created["status"] == "created" and created["name"] == "demo" and created["total_runs"] == 6
    assert set(created) >= {"id", "name", "spec_id", "status", "created_at"} and created["id"].startswith("exp-")
    response, created = await api.post("/v1/experiments", json={"name": "one", "spec_id": "demo", "replicas": 2, "matrix": [{"mode": "pass"}]})
    assert created["total_runs"] == 2 and created["matrix"] == [{"mode": "pass"}]
    response, body = await api.get(f"/v1/experiments/{created['id']}", key=other_tenant_key)
    assert response.status == 403
    response, body = await api.get("/v1/experiments/exp-nope")
    assert response.status == 404


async def test_run_twice_is_409_and_cancel(api, runner):
    await upload(api, spec_yaml(matrix=[{"mode": "block"}], replicas=4))
    response, created = await api.post("/v1/experiments", json={"name": "b", "spec_id": "demo", "concurrency": 1})
    response, _ = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202
    response, body = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 409 and body["error"] == "conflict" and body["details"] == {"state": "running"}
    await asyncio.wait_for(runner.started.wait(), 5)
    response, body = await api.get(f"/v1/experiments/{created['id']}")
    assert body["status"] == "running" and body["scenarios"][0]["status"] == "running"
    assert [r["status"] for r in body["scenarios"][0]["runs"]] == ["running", "queued", "queued", "queued"]
    response, cancelled = await api.post(f"/v1/experiments/{created['id']}/cancel")
    assert response.status == 200 and cancelled["status"] == "cancelled"
    results = await wait_done(api, created["id"])
    assert results["status"] == "cancelled"
    assert results["scenarios"][0]["status"] == "cancelled" and results["scenarios"][0]["verdict"] is None
    runs = results["scenarios"][0]["runs"]
    # The running replica was stopped: cancelled too (not an errored replica), with the run's reason.
    assert [r["status"] for r in runs] == ["cancelled"] * 4
    assert runs[0]["error"] == "cancelled: the run was cancelled" and runs[0]["attempts"] == 1
    assert results["metrics"]["total_runs"] == 0 and results["metrics"]["pass_rate"] is None
    assert len(runner.calls) == 1  # the queued ones never started
    response, body = await api.post(f"/v1/experiments/{created['id']}/cancel")
    assert response.status == 409 and body["details"]["state"] == "cancelled"
    response, body = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 409 and body["details"]["state"] == "cancelled"


async def test_list_filters_and_pagination(api):
    await upload(api, spec_yaml("a"))
    await upload(api, spec_yaml("b"))
    ids = []
    for spec_id in ("a", "a", "b"):
        response, created = await api.post("/v1/experiments", json={"name": spec_id, "spec_id": spec_id})
        ids.append(created["id"])
    await run_experiment(api, name="done", spec_id="b")
    response, page = await api.get("/v1/experiments", params={"limit": "2"})
    assert page["count"] == 2 and page["next_cursor"]
    response, rest = await api.get("/v1/experiments", params={"limit": "2", "cursor": page["next_cursor"]})
    assert rest["count"] == 2 and rest["next_cursor"] is None
    response, only_a = await api.get("/v1/experiments", params={"spec_id": "a"})
    assert sorted(e["id"] for e in only_a["items"]) == sorted(ids[:2])
    response, completed = await api.get("/v1/experiments", params={"status": "completed"})
    assert [e["name"] for e in completed["items"]] == ["done"] and completed["items"][0]["completed_runs"] == 1
    assert completed["items"][0]["summary"]["pass_rate"] == 1.0
    response, body = await api.get("/v1/experiments", params={"status": "bogus"})
    assert response.status == 400 and "query.status" in body["message"]


async def test_scenarios_endpoint_filters(api, other_tenant_key):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "fail"}, {"mode": "error"}], replicas=2))
    results = await run_experiment(api, name="mix", spec_id="demo")
    assert [s["verdict"] for s in results["scenarios"]] == ["pass", "fail", "error"]
    assert results["scenarios"][2]["errors"] == ["boot_failed: image localhost/nope:1 not found"]
    response, body = await api.get("/v1/scenarios")
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "query.experiment_id"
    response, body = await api.get("/v1/scenarios", params={"experiment_id": results["id"]}, key=other_tenant_key)
    assert response.status == 403
    for status, verdicts in (("passed", ["pass"]), ("failed", ["fail"]), ("error", ["error"]), ("not_passed", ["error", "fail"])):
        response, page = await api.get("/v1/scenarios", params={"experiment_id": results["id"], "status": status})
        assert response.status == 200 and sorted(s["verdict"] for s in page["items"]) == verdicts, status
    wanted = results["scenarios"][1]["id"]
    response, page = await api.get("/v1/scenarios", params={"experiment_id": results["id"], "scenario_id": wanted})
    assert [s["id"] for s in page["items"]] == [wanted] and len(page["items"][0]["runs"]) == 2
    response, body = await api.get("/v1/scenarios", params={"experiment_id": results["id"], "status": "weird"})
    assert response.status == 400


async def test_metrics_endpoint(api):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "fail"}], replicas=2))
    results = await run_experiment(api, name="m", spec_id="demo")
    response, metrics = await api.get(f"/v1/metrics/experiments/{results['id']}")
    assert response.status == 200
    s = metrics["summary"]
    assert metrics["experiment_id"] == results["id"]
    assert (s["total_runs"], s["pass_rate"]) == (4, 0.5)
    assert s["total_cost_usd"] == pytest.approx(0.012) and s["mean_cost_per_run_usd"] == pytest.approx(0.003)
    assert s["total_tool_calls"] == 8 and s["tool_success_rate"] == pytest.approx(6 / 8)
    assert s["mean_wall_ms"] is not None and s["p95_wall_ms"] >= s["mean_wall_ms"] * 0.5
    assert metrics["tool_breakdown"] == {
        "read_file": {"count": 4, "mean_ms": 10.0, "error_rate": 0.0},
        "write_file": {"count": 4, "mean_ms": 30.0, "error_rate": 0.5},
    }
    assert len(metrics["cost_trend"]) == 4 and {"run_id", "cost_usd", "ts"} <= set(metrics["cost_trend"][0])
    assert metrics["pass_rate_trend"][-1]["pass_rate"] == 0.5
    assert {t["run_id"] for t in metrics["cost_trend"]} == {rid for sc in results["scenarios"] for rid in sc["run_ids"]}


async def test_compare_flags_a_regression_and_an_equal_pair_is_clean(api, other_tenant_key):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "pass", "n": 2}], replicas=2))
    good = await run_experiment(api, name="good", spec_id="demo")
    good2 = await run_experiment(api, name="good2", spec_id="demo")
    bad = await run_experiment(api, name="bad", spec_id="demo", matrix=[{"mode": "pass"}, {"mode": "fail", "n": 2}])
    response, clean = await api.post("/v1/experiments/compare", json={"baseline_id": good["id"], "candidate_id": good2["id"],
                                                                      "thresholds": {"p95_wall_ms": 100}})
    assert response.status == 200 and clean["regressed"] is False and clean["regressions"] == []
    assert next(m for m in clean["metrics"] if m["name"] == "pass_rate")["direction"] == "same"
    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": good["id"], "candidate_id": bad["id"],
                                                                       "gate_thresholds": True})
    assert result["regressed"] is True
    assert "pass_rate fell from 1.00 to 0.50 (-0.50, threshold -0.02)" in result["regressions"]
    assert result["thresholds"]["pass_rate"] == -0.02 and result["thresholds"]["mean_cost_per_run_usd"] == 0.2
    pass_rate = next(m for m in result["metrics"] if m["name"] == "pass_rate")
    assert pass_rate == {**pass_rate, "baseline": 1.0, "candidate": 0.5, "delta": -0.5, "direction": "worse", "regressed": True}
    # Matrix entries differ ({"mode": "pass", "n": 2} vs {"mode": "fail", "n": 2}): reported as only-in-one-side.
    assert result["only_in_baseline"] == [{"mode": "pass", "n": 2}] and result["only_in_candidate"] == [{"mode": "fail", "n": 2}]
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": good["id"], "candidate_id": bad["id"],
                                                                     "thresholds": {"latency": 1}})
    assert response.status == 400 and "latency" in body["message"]
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": good["id"], "candidate_id": "exp-nope"})
    assert response.status == 404
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": good["id"], "candidate_id": bad["id"]},
                                    key=other_tenant_key)
    assert response.status == 403
    response, created = await api.post("/v1/experiments", json={"name": "pending", "spec_id": "demo"})
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": good["id"], "candidate_id": created["id"]})
    assert response.status == 409 and body["details"]["state"] == "created"


async def test_compare_matches_scenarios_by_matrix_entry_and_replica(api):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "odd"}], replicas=2))
    before = await run_experiment(api, name="before", spec_id="demo", seed=base_seed_for([False, False], 1))
    after = await run_experiment(api, name="after", spec_id="demo", seed=base_seed_for([False, True], 1))
    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": before["id"], "candidate_id": after["id"],
                                                                       "gate_thresholds": True})
    assert result["regressed"] is True
    [change] = result["changed_scenarios"]
    assert change["matrix_entry"] == {"mode": "odd"} and change["direction"] == "worse"
    assert (change["baseline"]["verdict"], change["candidate"]["verdict"]) == ("pass", "flaky")
    assert [(r["index"], r["baseline"], r["candidate"]) for r in change["replicas"]] == [(1, "passed", "failed")]


async def test_filter_failing_reruns_exactly_the_failed_ones(api, runner):
    matrix = [{"mode": "pass", "i": 0}, {"mode": "fail", "i": 1}, {"mode": "error", "i": 2}, {"mode": "odd", "i": 3}, {"mode": "pass", "i": 4}]
    await upload(api, spec_yaml(matrix=matrix, replicas=2))
    first = await run_experiment(api, name="first", spec_id="demo", seed=base_seed_for([True, False], 3))
    assert [s["verdict"] for s in first["scenarios"]] == ["pass", "fail", "error", "flaky", "pass"]
    runner.calls.clear()
    second = await run_experiment(api, name="again", spec_id="demo", filter_failing_from=first["id"])
    assert [s["matrix_entry"]["i"] for s in second["scenarios"]] == [1, 2, 3]
    assert second["total_runs"] == 6 and len(runner.calls) == 6 and second["filter_failing_from"] == first["id"]
    assert sorted(c["matrix_entry"]["i"] for c in runner.calls) == [1, 1, 2, 2, 3, 3]
    # Nothing failed: nothing to run; the experiment completes at once with no scenarios.
    await upload(api, spec_yaml("green"))
    green = await run_experiment(api, name="green", spec_id="green")
    empty = await run_experiment(api, name="none", spec_id="green", filter_failing_from=green["id"])
    assert empty["status"] == "completed" and empty["scenarios"] == [] and empty["total_runs"] == 0
    response, body = await api.post("/v1/experiments", json={"spec_id": "green", "filter_failing_from": first["id"]})
    assert response.status == 400 and "filter_failing_from" in body["message"]


async def test_secrets_are_passed_in_memory_never_stored_or_echoed(api, runner):
    await upload(api, spec_yaml(extra="secrets:\n  API_TOKEN: env\n"))
    value = "s3cr3t-value-for-the-test"
    response, created = await api.post("/v1/experiments", json={"name": "sec", "spec_id": "demo", "secrets": {"API_TOKEN": value}})
    assert value not in json.dumps(created) and created["secret_names"] == ["API_TOKEN"]
    response, _ = await api.post(f"/v1/experiments/{created['id']}/run")
    results = await wait_done(api, created["id"])
    assert value not in json.dumps(results)
    assert runner.calls[0]["secrets"] == {"API_TOKEN": value}
    store = api.app[STORE]
    for table in ("experiments", "scenarios", "scenario_jobs", "idempotency"):
        rows = await store.fetchall(f"SELECT * FROM {table}")
        assert value not in json.dumps([dict(r) for r in rows], default=str), table


async def test_export_and_history(api):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}, {"mode": "fail"}]))
    results = await run_experiment(api, name="exp1", spec_id="demo")
    response = await api.client.get(f"/v1/experiments/{results['id']}/export", headers=api.headers())
    bundle = await response.json()
    assert response.status == 200 and bundle["experiment"]["id"] == results["id"]
    assert bundle["spec"]["yaml"].startswith("version: 1") and bundle["spec"]["version"] == 1
    assert len(bundle["experiment"]["scenarios"]) == 2 and len(bundle["trace_events"]) == 4
    assert {r["id"] for r in bundle["runs"]} == {rid for s in results["scenarios"] for rid in s["run_ids"]}
    response = await api.client.get(f"/v1/experiments/{results['id']}/export", params={"format": "ndjson"}, headers=api.headers())
    lines = [json.loads(line) for line in (await response.text()).splitlines()]
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    kinds = [line["type"] for line in lines]
    assert kinds[:2] == ["experiment", "spec"] and kinds.count("scenario") == 2 and kinds.count("trace_event") == 4
    assert kinds.count("run") == 2
    response, body = await api.get(f"/v1/experiments/{results['id']}/export", params={"format": "xml"})
    assert response.status == 400
    second = await run_experiment(api, name="exp2", spec_id="demo", matrix=[{"mode": "pass"}])
    response, history = await api.get("/v1/evals/demo/history")
    assert [h["experiment_id"] for h in history["items"]] == [second["id"], results["id"]]
    assert history["items"][0]["pass_rate"] == 1.0 and history["items"][1]["pass_rate"] == 0.5
    assert set(history["items"][0]) >= {"experiment_id", "name", "created_at", "spec_version", "pass_rate", "total_cost_usd", "p95_wall_ms"}
    response, body = await api.get("/v1/evals/nope/history")
    assert response.status == 404


async def test_experiment_stream_ends_with_done(api):
    await upload(api, spec_yaml(matrix=[{"mode": "pass"}], replicas=2))
    results = await run_experiment(api, name="s", spec_id="demo")
    response = await api.client.get(f"/v1/experiments/{results['id']}/stream", headers=api.headers())
    events = sse_data(await response.text())
    types = [e["type"] for e in events]
    assert types[-1] == "done" and types.count("run") == 2 and "scenario" in types
    assert events[-1]["status"] == "completed" and events[-1]["summary"]["pass_rate"] == 1.0


async def test_concurrency_limits_apply(api, runner):
    # only the spec's and the experiment's caps here (the per-tenant cap: tests/security/test_caps_fairness.py)
    api.app[service_mod.SERVICE_KEY].scheduler.set_tenant_cap(None)
    await upload(api, spec_yaml("lim", matrix=[{"mode": "block"}], replicas=4, extra="resources:\n  concurrency_limit: 1\n"))
    await upload(api, spec_yaml("free", matrix=[{"mode": "block"}], replicas=4))
    ids = []
    for spec_id, concurrency in (("lim", None), ("lim", None), ("free", 2)):
        body = {"spec_id": spec_id, **({"concurrency": concurrency} if concurrency else {})}
        response, created = await api.post("/v1/experiments", json=body)
        await api.post(f"/v1/experiments/{created['id']}/run")
        ids.append(created["id"])
    await asyncio.sleep(0.2)
    service = api.app[service_mod.SERVICE_KEY]
    running = {i: service.scheduler.running_count(i) for i in ids}
    # spec 'lim' allows one run at a time across both of its experiments; 'free' is capped at 2.
    assert running[ids[0]] + running[ids[1]] == 1
    assert running[ids[2]] == min(2, service.limit - 1)
    runner.release.set()
    for i in ids:
        assert (await wait_done(api, i))["status"] == "completed"


async def test_at_capacity_requeues_without_losing_the_run(api, runner, monkeypatch):
    monkeypatch.setattr(service_mod, "AT_CAPACITY_RETRY_S", 0.01)
    await upload(api, spec_yaml(matrix=[{"mode": "capacity"}], replicas=2))
    results = await run_experiment(api, name="cap", spec_id="demo")
    assert results["scenarios"][0]["verdict"] == "pass"
    assert [r["attempts"] for r in results["scenarios"][0]["runs"]] == [1, 1]


async def test_scenario_timeout_is_an_error_verdict(api, runner, monkeypatch):
    monkeypatch.setattr(service_mod, "OUTER_TIMEOUT_MARGIN_S", 0.0)
    monkeypatch.setattr(service_mod, "TIMEOUT_GRACE_S", 0.05)
    yaml = spec_yaml(matrix=[{"mode": "hang"}], extra="resources:\n  timeout: 0.2s\n")
    await upload(api, yaml.replace("  binary: sh\n", "  binary: sh\n  timeout: 0.1s\n"))
    results = await run_experiment(api, name="slow", spec_id="demo")
    scenario = results["scenarios"][0]
    assert scenario["verdict"] == "error"
    assert scenario["runs"][0]["error"].startswith("timeout: the scenario exceeded resources.timeout (200ms)")
    assert results["status"] == "completed"  # the experiment itself proceeded


async def test_openapi_documents_the_endpoints(api):
    response, doc = await api.get("/v1/openapi.json")
    paths = doc["paths"]
    for path in ("/v1/replicas", "/v1/replicas/{suite_id}", "/v1/replicas/{suite_id}/stream", "/v1/experiments",
                 "/v1/experiments/{experiment_id}", "/v1/experiments/{experiment_id}/run", "/v1/experiments/{experiment_id}/cancel",
                 "/v1/experiments/compare", "/v1/metrics/experiments/{experiment_id}", "/v1/scenarios",
                 "/v1/evals/{spec_id}/history", "/v1/experiments/{experiment_id}/export"):
        assert path in paths, path
    compare = paths["/v1/experiments/compare"]["post"]
    assert "pass_rate -0.02" in compare["summary"]
    assert "CompareRequest" in doc["components"]["schemas"] and "RunResults" in doc["components"]["schemas"]


async def test_replica_completed_webhook_carries_the_suite(api, aiohttp_server):
    from aiohttp import web

    from daemon.webhooks import verify

    received: list[tuple[dict, bytes]] = []
    arrived = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        received.append((dict(request.headers), await request.read()))
        arrived.set()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", hook)
    server = await aiohttp_server(app)
    response, registered = await api.post("/v1/webhooks", json={"url": str(server.make_url("/hook")), "events": ["replica.completed"]})
    assert response.status == 201, registered
    await upload(api, spec_yaml())
    response, suite = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 3})
    await asyncio.wait_for(arrived.wait(), 10)
    headers, body = received[0]
    assert headers["X-Svc-Event"] == "replica.completed"
    assert verify(registered["secret"], headers["X-Svc-Signature"], body)
    payload = json.loads(body)
    assert payload["id"] == suite["id"] and payload["status"] == "complete" and payload["passed"] == 3
    assert payload["seeds"] == suite["seeds"]
