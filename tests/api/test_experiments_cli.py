"""`svc eval …` and `svc replicas …` as real subprocesses against the in-process daemon (TCP), with
the deterministic scenario function of test_experiments.py: exit codes, stdout/stderr split,
local secret resolution, --filter-failing, --gate."""
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


async def svc(api, *args: str, cwd: Path | None = None, **env: str) -> tuple[int, str, str]:
    return await svc_cli(api, *args, cwd=cwd or ROOT, home=cwd or ROOT, timeout=120, **env)


def write_spec(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


async def test_eval_run_prints_results_and_a_summary_and_exits_by_outcome(api, runner, tmp_path):
    green = write_spec(tmp_path, "green", spec_yaml("green", matrix=[{"mode": "pass"}], replicas=2))
    code, out, err = await svc(api, "eval", "run", str(green), "--poll", "50ms")
    assert code == 0, err
    results = json.loads(out)
    assert results["name"] == "green" and results["status"] == "completed" and results["metrics"]["pass_rate"] == 1.0
    assert "verdicts: pass 1 · fail 0 · flaky 0 · error 0" in err and "SCENARIO" in err

    red = write_spec(tmp_path, "red", spec_yaml("red", matrix=[{"mode": "pass"}, {"mode": "fail"}]))
    code, out, err = await svc(api, "eval", "run", str(red), "--poll", "50ms", "--name", "nightly", "--replicas", "3", "--concurrency", "1")
    assert code == 1
    results = json.loads(out)
    assert results["name"] == "nightly" and results["total_runs"] == 6 and results["concurrency"] == 1
    assert "verdicts: pass 1 · fail 1 · flaky 0 · error 0" in err and "reproduce scn_" in err

    code, out, err = await svc(api, "eval", "run", str(red), "--poll", "50ms", "--json")
    assert code == 1 and json.loads(out)["status"] == "completed" and err == ""
    code, out, err = await svc(api, "eval", "run", str(red), "--poll", "50ms", "--quiet")
    assert code == 1 and out == "" and err.startswith("experiment exp-")


async def test_eval_run_resolves_secrets_locally_and_names_a_missing_one(api, runner, tmp_path):
    (tmp_path / "token.txt").write_text("from-file\n")
    secrets = "secrets:\n  A: env\n  B: env:OTHER_B\n  C: file:token.txt\n  D: \"command:printf from-command\"\n  E: dashboard\n"
    spec = write_spec(tmp_path, "sec", spec_yaml("sec", extra=secrets))
    code, out, err = await svc(api, "eval", "run", str(spec), "--poll", "50ms", cwd=tmp_path, A="from-env", OTHER_B="from-other")
    assert code == 0, err
    assert runner.calls[-1]["secrets"] == {"A": "from-env", "B": "from-other", "C": "from-file", "D": "from-command"}
    assert "from-env" not in out and "from-file" not in out
    code, out, err = await svc(api, "eval", "run", str(spec), "--poll", "50ms", cwd=tmp_path, OTHER_B="x")
    assert code == 1 and out == ""
    assert "secret 'A' (source env) is missing: environment variable A is not set" in err
    bad = write_spec(tmp_path, "bad", spec_yaml("bad").replace("type: file_exists", "type: nope"))
    code, out, err = await svc(api, "eval", "run", str(bad))
    assert code == 1 and "bad.yaml:" in err and "nope" in err


async def test_filter_failing_and_the_gate(api, runner, tmp_path):
    spec = write_spec(tmp_path, "grid", spec_yaml("grid", matrix=[{"mode": "pass"}, {"mode": "odd"}, {"mode": "fail"}], replicas=2))
    seed = base_seed_for([False, True], 1)
    code, out, err = await svc(api, "eval", "run", str(spec), "--poll", "50ms", "--seed", seed, "--json")
    first = json.loads(out)
    assert code == 1 and [s["verdict"] for s in first["scenarios"]] == ["pass", "flaky", "fail"]
    runner.calls.clear()
    code, out, err = await svc(api, "eval", "run", str(spec), "--poll", "50ms", "--filter-failing", first["id"], "--json")
    again = json.loads(out)
    assert [s["matrix_entry"] for s in again["scenarios"]] == [{"mode": "odd"}, {"mode": "fail"}]
    assert sorted(c["matrix_entry"]["mode"] for c in runner.calls) == ["fail", "fail", "odd", "odd"]

    green = write_spec(tmp_path, "green", spec_yaml("grid", matrix=[{"mode": "pass"}, {"mode": "pass", "x": 1}], replicas=2))
    code, out, err = await svc(api, "eval", "run", str(green), "--poll", "50ms", "--json")
    baseline = json.loads(out)["id"]
    code, out, err = await svc(api, "eval", "run", str(green), "--poll", "50ms", "--json")
    equal = json.loads(out)["id"]
    code, out, err = await svc(api, "eval", "compare", baseline, equal, "--gate", "--threshold", "p95_wall_ms=100")
    assert code == 0 and json.loads(out)["regressed"] is False and "no regression" in err
    code, out, err = await svc(api, "eval", "compare", baseline, first["id"], "--gate", "--gate-thresholds")
    assert code == 1 and json.loads(out)["regressed"] is True and "pass_rate fell from 1.00" in err
    code, out, err = await svc(api, "eval", "compare", baseline, first["id"])
    assert code == 0  # without --gate a regression is reported, not an error


async def test_list_get_metrics_scenarios_export_history_cancel(api, runner, tmp_path):
    spec = write_spec(tmp_path, "mix", spec_yaml("mix", matrix=[{"mode": "pass"}, {"mode": "fail"}]))
    code, out, err = await svc(api, "eval", "run", str(spec), "--poll", "50ms", "--json")
    exp = json.loads(out)["id"]
    code, out, err = await svc(api, "eval", "list", "--status", "completed")
    assert code == 0 and [e["id"] for e in json.loads(out)["items"]] == [exp]
    code, out, err = await svc(api, "eval", "get", exp, "--summary")
    assert code == 0 and json.loads(out)["experiment_id"] == exp and "verdicts:" in err
    code, out, err = await svc(api, "eval", "metrics", exp)
    assert code == 0 and json.loads(out)["summary"]["total_runs"] == 2
    code, out, err = await svc(api, "eval", "scenarios", "--experiment", exp, "--status", "failed")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [s["matrix_entry"] for s in lines] == [{"mode": "fail"}]
    target = tmp_path / "bundle.ndjson"
    code, out, err = await svc(api, "eval", "export", exp, "--format", "ndjson", "-o", str(target))
    assert code == 0 and json.loads(target.read_text().splitlines()[0])["type"] == "experiment"
    code, out, err = await svc(api, "eval", "history", "mix")
    assert code == 0 and json.loads(out)["items"][0]["experiment_id"] == exp
    code, out, err = await svc(api, "eval", "run", str(spec), "--no-wait")
    created = json.loads(out)
    assert code == 0 and created["status"] == "created"
    code, out, err = await svc(api, "eval", "get", "exp-missing")
    assert code == 1 and "404 not_found" in err


async def test_replicas_run_wait(api, runner, tmp_path):
    await api.upload_yaml(spec_yaml("rep"), name="r")
    code, out, err = await svc(api, "replicas", "run", "rep", "-n", "3", "--inputs", '{"mode": "pass"}', "--wait")
    suite = json.loads(out)
    assert code == 0 and suite["passed"] == 3 and suite["verdict"] == "pass"
    assert err.count("svc: replica ") == 3
    code, out, err = await svc(api, "replicas", "run", "rep", "-n", "1")
    assert code == 1 and "n_replicas" in err


async def test_replicas_run_resolves_secrets_here_for_a_stored_spec_or_a_spec_file(api, runner, tmp_path):
    # A stored spec id: the YAML is fetched, `file:` resolves against the current directory.
    (tmp_path / "tok.txt").write_text("from-cwd\n")
    secrets = "secrets:\n  T: file:tok.txt\n  U: \"command:printf from-command\"\n"
    await api.upload_yaml(spec_yaml("rep-sec", extra=secrets), name="rs")
    code, out, err = await svc(api, "replicas", "run", "rep-sec", "-n", "2", "--wait", cwd=tmp_path)
    assert code == 0, err
    assert {tuple(sorted(c["secrets"].items())) for c in runner.calls[-2:]} == {(("T", "from-cwd"), ("U", "from-command"))}
    code, out, err = await svc(api, "replicas", "run", "rep-sec", "-n", "2", cwd=ROOT)
    assert code == 1 and "secret 'T' (source file:tok.txt) is missing" in err and "current directory" in err
    code, out, err = await svc(api, "replicas", "run", "rep-sec", "-n", "2", "--secret", "T=given", "--wait", cwd=ROOT)
    assert code == 0 and runner.calls[-1]["secrets"] == {"T": "given", "U": "from-command"}, err
    # A spec file: uploaded first (a new version), `file:` resolves against the spec file's directory.
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "tok.txt").write_text("from-spec-dir")
    spec = write_spec(sub, "rep-sec", spec_yaml("rep-sec", extra=secrets))
    code, out, err = await svc(api, "replicas", "run", str(spec), "-n", "2", "--wait", cwd=ROOT)
    assert code == 0, err
    assert json.loads(out)["spec_version"] == 2 and runner.calls[-1]["secrets"]["T"] == "from-spec-dir"
