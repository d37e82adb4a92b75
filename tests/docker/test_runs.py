"""Runs end to end through the real daemon and engine: known-good and noop snapshot agents, the
weighted threshold, gates, agent timeout and boot failure as `error`, replay from the reproducer
(through the real CLI), the stream, the signed trajectory URL, cancel, webhooks, given sandboxes."""
from __future__ import annotations

import asyncio
import json
import signal
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from daemon.runner import records
from daemon.webhooks import verify
from tests.support.engine import assert_released
from tests.support.homes import short_dir
from tests.support.procs import SvcdProcess
from tests.support.specs import tiny_spec
from tests.support.images import PYTHON
from tests.support.released import released_soon
from tests.support.waiting import wait_for
from tests.support.runs import (
    REPO,
    Receiver,
    cli_spec,
    inv,
    replay_with_cli,
    result,
    run_spec,
    start_run,
    statuses,
    stream_events,
    upload,
    upload_agent,
    wait_run,
    wait_run_in_sandbox,
)
from daemon.appkeys import URL_SIGNING_KEY

pytestmark = pytest.mark.asyncio(loop_scope="module")

QUICKSTART_LIKE = {
    "version": 1,
    "id": "count-users",
    "base": PYTHON,
    "task": {"prompt": "Count the users in the {{ table }} table and write the number to report.txt", "inputs": {"table": "users"}},
    "agent": {"type": "snapshot", "snapshot": "good", "timeout": "1m"},
    "services": [{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}],
    "fixtures": [{"service": "db", "sql": "CREATE TABLE users (id serial PRIMARY KEY, name text);"
                                          " INSERT INTO users (name) VALUES ('ada'), ('grace'), ('linus');"}],
    "invariants": {
        "report_written": {"gate": True, "check": {"type": "file_exists", "path": "report.txt"}},
        "report_counts_users": {"weight": 2, "check": {"type": "file_content", "path": "report.txt", "regex": "^users: 3$"}},
        "users_untouched": {"check": {"type": "sql", "service": "db", "query": "SELECT count(*) FROM users", "expect_scalar": 3}},
    },
    "forbidden": {"file_writes_outside": ["/workspace"], "secrets_in_logs": "deny"},
    "audit": {"stdout_capture": True, "process_spawns": True},  # the audit_log export shows process_spawn
    "scoring": {"pass_threshold": 0.8},
    "resources": {"timeout": "3m"},
    "teardown": {"always_run": True, "export": [
        {"type": "audit_log", "to": "runs/{{ run_id }}/audit.jsonl"},
        {"type": "db_dump", "service": "db", "to": "runs/{{ run_id }}/db.sql"},
        {"type": "snapshot", "to": "scenarios/{{ scenario_id }}/workspace.tar.gz"},
    ]},
}


async def test_known_good_agent_passes_and_noop_fails(api, docker_client):
    good = await upload_agent(api, "good", REPO / "examples/agents/good", ["python3", "agent.py"])
    await upload_agent(api, "noop", REPO / "examples/agents/noop", ["python3", "agent.py"])
    passed = await run_spec(api, QUICKSTART_LIKE)
    assert passed["status"] == "passed", json.dumps(passed, indent=1)
    assert passed["verdict"] == "pass" and passed["score"] == 1.0
    assert passed["agent"]["type"] == "snapshot" and passed["agent"]["snapshot_id"] == good["id"]
    assert passed["agent"]["command"] == ["python3", "/agent/agent.py"]
    assert statuses(passed) == {"report_written": "passed", "report_counts_users": "passed", "users_untouched": "passed",
                                "forbidden.file_writes_outside": "passed", "forbidden.secrets_in_logs": "passed"}
    assert set(passed["timings"]) >= {"boot_ms", "agent_ms", "checks_ms", "teardown_ms"}
    await released_soon(docker_client, passed["sandbox_id"])
    exports = {a["type"]: a for a in passed["artifacts"]}
    assert exports["audit_log"]["to"] == f"runs/{passed['id']}/audit.jsonl"
    assert exports["snapshot"]["to"] == f"scenarios/{passed['id']}/workspace.tar.gz"  # no scenario: the run id
    assert all("error" not in a and a["size_bytes"] > 0 for a in exports.values()), exports
    assert "CREATE TABLE public.users" in Path(exports["db_dump"]["path"]).read_text()
    with tarfile.open(exports["snapshot"]["path"]) as tar:
        assert "workspace/report.txt" in tar.getnames() and not any(".svc" in n for n in tar.getnames())
    assert any(json.loads(line)["type"] == "process_spawn" for line in Path(exports["audit_log"]["path"]).read_text().splitlines())

    noop_doc = {**QUICKSTART_LIKE, "agent": {"type": "snapshot", "snapshot": "noop", "timeout": "1m"}}
    noop_doc["id"] = "count-users-noop"
    failed = await run_spec(api, noop_doc)
    assert failed["status"] == "failed" and failed["verdict"] == "fail"
    assert failed["score"] == 0.0  # the gate forced it
    assert "gate failed: report_written" in failed["reason"]
    assert result(failed, "report_written")["evidence"] == {"path": "report.txt", "exists": False}
    assert result(failed, "users_untouched")["status"] == "passed"

    # Each reproducer, pasted into the real CLI, replays the same scenario to the same verdict.
    for run in (passed, failed):
        code, replayed = await replay_with_cli(api, run)
        assert replayed["seed"] == run["seed"] and replayed["spec_version"] == run["spec_version"]
        assert (code, replayed["status"]) == ((0, "passed") if run is passed else (1, "failed"))


async def test_weighted_failure_under_threshold(api):
    doc = cli_spec("weighted", "echo hello > out.txt", {
        "exists": inv({"type": "file_exists", "path": "out.txt"}),
        "says_goodbye": inv({"type": "file_content", "path": "out.txt", "contains": "goodbye"}, weight=3),
    }, scoring={"pass_threshold": 0.5})
    run = await run_spec(api, doc)
    assert run["status"] == "failed" and run["score"] == 0.25
    assert "below pass_threshold" in run["reason"]
    evidence = result(run, "says_goodbye")["evidence"]
    assert evidence["contains"] == "goodbye" and evidence["content"] == "hello\n"
    code, replayed = await replay_with_cli(api, run)
    assert code == 1 and replayed["status"] == "failed" and replayed["score"] == 0.25


async def test_agent_timeout_is_error(api, docker_client):
    doc = cli_spec("sleepy", "echo started; sleep 30; echo never > late.txt",
                   {"late": inv({"type": "file_exists", "path": "late.txt"})}, timeout="1s",
                   teardown={"always_run": False, "export": [{"type": "snapshot", "to": "x/{{ run_id }}.tar.gz"}]})
    run = await run_spec(api, doc)
    assert run["status"] == "errored" and run["verdict"] == "error" and run["reason"] == "agent_timeout"
    assert run["error"]["step"] == "agent" and "timeout" in run["error"]["message"]
    assert result(run, "late")["status"] == "failed"  # checks still ran, for the evidence
    assert run["artifacts"] == []  # teardown.always_run: false skips the exports of an errored run
    await released_soon(docker_client, run["sandbox_id"])
    code, replayed = await replay_with_cli(api, run)
    assert code == 1 and replayed["status"] == "errored" and replayed["reason"] == "agent_timeout"


async def test_boot_failure_is_error(api):
    doc = cli_spec("bad-setup", "true", {"x": inv({"type": "file_exists", "path": "x"})},
                   setup={"commands": ["echo cannot >&2; exit 3"]})
    run = await run_spec(api, doc)
    assert run["status"] == "errored" and run["reason"] == "boot_failed"
    assert run["error"]["step"] == "boot" and run["error"]["sandbox_error"]["step"] == "setup"
    assert run["invariant_results"] == [] and run["score"] is None
    code, replayed = await replay_with_cli(api, run)
    assert code == 1 and replayed["reason"] == "boot_failed"


async def test_missing_snapshot_is_error(api):
    doc = cli_spec("ghost-agent", "true", {"x": inv({"type": "file_exists", "path": "x"})})
    doc["agent"] = {"type": "snapshot", "snapshot": "does-not-exist", "timeout": "1m"}
    run = await run_spec(api, doc)
    assert run["status"] == "errored" and run["reason"] == "agent_unavailable"
    assert "does-not-exist" in run["error"]["message"]


SEEDED = (
    'printf "%s\\n" "$SERVICE_SEED" > seed.txt; '
    'python3 -c "import os, random; random.seed(os.environ[\'SERVICE_SEED\']); print(random.random())" > draw.txt; '
    'cat .svc/task.json > task-copy.json; printf "%s" "$SERVICE_TASK_PROMPT" > prompt.txt'
)


async def test_replay_reproduces_seed_inputs_and_prompt(api):
    doc = cli_spec("seeded", SEEDED, {
        "draw": inv({"type": "custom", "command": 'python3 -c "import json; print(json.dumps({\'passed\': True, \'evidence\': {\'draw\': open(\'draw.txt\').read().strip()}}))"'}),
        "prompt": inv({"type": "file_content", "path": "prompt.txt", "equals": "Greet Ada in French"}),
    })
    doc["task"] = {"prompt": "Greet {{ who }} in {{ language }}", "inputs": {"language": "English"}}
    run = await run_spec(api, doc, seed="seed_fixed_1", inputs={"who": "Ada"}, matrix_entry={"language": "French"})
    assert run["status"] == "passed", json.dumps(run["invariant_results"], indent=1)
    assert run["seed"] == "seed_fixed_1"
    draw = result(run, "draw")["evidence"]["draw"]
    assert "--matrix" in run["reproducer"]["command"] and "--inputs" in run["reproducer"]["command"]

    response, queued = await api.post(f"/v1/runs/{run['id']}/replay", headers={"Idempotency-Key": "replay-seeded-1"})
    assert response.status == 202 and queued["replay_of"] == run["id"] and queued["seed"] == run["seed"]
    response, again = await api.post(f"/v1/runs/{run['id']}/replay", headers={"Idempotency-Key": "replay-seeded-1"})
    assert again["id"] == queued["id"]  # the Idempotency-Key replays the answer, not the run
    replayed = await wait_run(api, queued["id"])
    assert replayed["status"] == "passed" and result(replayed, "draw")["evidence"]["draw"] == draw
    assert replayed["inputs"] == {"who": "Ada"} and replayed["matrix_entry"] == {"language": "French"}

    code, from_cli = await replay_with_cli(api, run)
    assert code == 0 and result(from_cli, "draw")["evidence"]["draw"] == draw

    other = await run_spec(api, spec_id="seeded", seed="seed_other", inputs={"who": "Ada"}, matrix_entry={"language": "French"})
    assert result(other, "draw")["evidence"]["draw"] != draw


async def test_stream_and_signed_trajectory(api):
    doc = cli_spec("streamed", "echo working; echo done > out.txt", {
        "out": inv({"type": "file_exists", "path": "out.txt"}),
        "nope": inv({"type": "file_exists", "path": "missing.txt"}),
    }, scoring={"pass_threshold": 0.5})
    await upload(api, doc)
    queued = await start_run(api, "streamed")
    events = await stream_events(api, queued["id"])
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done" and events[-1] == {"type": "done", "run_id": queued["id"], "status": "passed", "score": 0.5}
    steps = [e for e in events if e["type"] == "step"]
    assert [s["action"] for s in steps] == ["boot", "task", "agent", "checks", "forbidden", "teardown"]
    assert [s["step"] for s in steps] == list(range(1, 7)) and all(s["latency_ms"] >= 0 for s in steps)
    assert [(e["invariant_id"], e["status"]) for e in events if e["type"] == "invariant_result"] == [("out", "passed"), ("nope", "failed")]
    late = await stream_events(api, queued["id"])  # a late subscriber gets the history, then the end
    assert late == events

    run = await wait_run(api, queued["id"])
    url = run["trajectory_url"]
    assert url.startswith("/v1/runs/") and "sig=" in url and "expires=" in url
    response = await api.client.get(url)  # no Authorization header
    assert response.status == 200
    trajectory = await response.json()
    assert trajectory["run_id"] == run["id"] and trajectory["agent"]["stdout"] == "working\n"
    assert trajectory["agent"]["exit_code"] == 0 and trajectory["task"]["prompt"] == "do the thing"
    assert any(c["phase"] == "agent" for c in trajectory["commands"])
    # audit.process_spawns is off: the trajectory does not show them (the daemon's evidence keeps them)
    assert not any(e["type"] == "process_spawn" for e in trajectory["audit_events"])
    assert set(trajectory["timings"]) >= {"boot_ms", "agent_ms", "checks_ms"}

    tampered = url.replace("sig=", "sig=0")
    response = await api.client.get(tampered)
    assert response.status == 403 and (await response.json())["error"] == "forbidden"
    other_run = url.replace(run["id"], "run_000000000000000000")
    assert (await api.client.get(other_run)).status == 403
    key = api.app[URL_SIGNING_KEY]
    expired = records.trajectory_path(key, run["id"], expires=int(time.time()) - 5)
    response = await api.client.get(expired)
    assert response.status == 403 and "expired" in (await response.json())["message"]


async def test_cancel_running_and_queued(api, docker_client):
    doc = cli_spec("long", "sleep 60", {"x": inv({"type": "file_exists", "path": "x"})}, timeout="2m")
    await upload(api, doc)
    queued = await start_run(api, "long")
    await wait_run_in_sandbox(api, queued["id"], status="running")
    response, cancelled = await api.post(f"/v1/runs/{queued['id']}/cancel")
    assert response.status == 200, cancelled
    assert cancelled["status"] == "errored" and cancelled["reason"] == "cancelled"
    await released_soon(docker_client, cancelled["sandbox_id"])
    response, body = await api.post(f"/v1/runs/{queued['id']}/cancel")
    assert response.status == 409 and body["error"] == "conflict" and body["details"]["state"] == "errored"


async def test_run_completed_webhook(api):
    receiver = await Receiver().start()
    try:
        response, hook = await api.post("/v1/webhooks", json={"url": receiver.url, "events": ["run.completed"]})
        run = await run_spec(api, cli_spec("hooked", "touch x", {"x": inv({"type": "file_exists", "path": "x"})}))
        await asyncio.wait_for(receiver.got.wait(), 10)
        call = next(c for c in receiver.calls if json.loads(c["body"])["id"] == run["id"])
        assert call["headers"]["X-Svc-Event"] == "run.completed"
        assert verify(hook["secret"], call["headers"]["X-Svc-Signature"], call["body"])
        sent = json.loads(call["body"])
        assert sent["status"] == "passed" and sent["invariant_results"][0]["invariant_id"] == "x"
    finally:
        await api.delete(f"/v1/webhooks/{hook['id']}")
        await receiver.stop()


async def test_run_in_a_given_sandbox_leaves_it_running(api):
    doc = cli_spec("in-place", "echo hi > mine.txt", {"mine": inv({"type": "file_content", "path": "mine.txt", "contains": "hi"})})
    await upload(api, doc)
    response, sandbox = await api.post("/v1/sandboxes", json={"spec_id": "in-place"})
    assert response.status == 201 and sandbox["state"] == "ready", sandbox
    try:
        run = await run_spec(api, spec_id="in-place", sandbox_id=sandbox["id"])
        assert run["status"] == "passed" and run["sandbox_id"] == sandbox["id"]
        response, still = await api.get(f"/v1/sandboxes/{sandbox['id']}")
        assert still["state"] == "running"
        response, file = await api.get(f"/v1/sandboxes/{sandbox['id']}/files/mine.txt")
        assert response.status == 200
    finally:
        await api.delete(f"/v1/sandboxes/{sandbox['id']}")
    response, body = await api.post("/v1/runs", json={"spec_id": "in-place", "sandbox_id": sandbox["id"]})
    assert response.status == 409 and body["error"] == "conflict"


async def test_image_agent_runs_on_the_sandbox_network(api, docker_client):
    doc = cli_spec("image-agent", "true", {
        "wrote": inv({"type": "file_content", "path": "img.txt", "contains": "from image run_"}),
    })
    doc["agent"] = {"type": "image", "image": PYTHON, "timeout": "30s",
                    "command": ["sh", "-c", 'echo "from image $SERVICE_RUN_ID" > /workspace/img.txt; echo "$SERVICE_TASK_PROMPT"']}
    run = await run_spec(api, doc)
    assert run["status"] == "passed", json.dumps(run, indent=1)[:2000]
    assert run["agent"]["type"] == "image" and run["agent"]["image"] == PYTHON
    response = await api.client.get(run["trajectory_url"])
    trajectory = await response.json()
    assert trajectory["agent"]["stdout"] == "do the thing\n" and trajectory["agent"]["exit_code"] == 0
    await released_soon(docker_client, run["sandbox_id"])


async def test_snapshot_auth_required_env_and_config_files(api, tmp_path):
    (tmp_path / "agent.sh").write_text('grep -qx "key=$AGENT_KEY" "$HOME/.agentrc" && grep -q "$AGENT_KEY" .agent/conf && touch ok\n')
    import aiohttp

    from client.commands.agents import pack_directory

    form = aiohttp.FormData()
    form.add_field("metadata", json.dumps({"name": "needs-key", "entrypoint": ["sh", "agent.sh"], "auth": {
        "required_env": ["AGENT_KEY"],
        "config_files": [{"path": "~/.agentrc", "template": "key={{ AGENT_KEY }}\n"},
                         {"path": ".agent/conf", "template": "token: {{AGENT_KEY}}"}],
    }}), content_type="application/json")
    form.add_field("bundle", pack_directory(tmp_path), filename="b.tar.gz", content_type="application/gzip")
    response, snap = await api.post("/v1/agents", data=form)
    assert response.status == 201, snap
    doc = cli_spec("keyed", "true", {"ok": inv({"type": "file_exists", "path": "ok"})})
    doc["agent"] = {"type": "snapshot", "snapshot": "needs-key", "timeout": "30s"}
    await upload(api, doc)

    missing = await run_spec(api, spec_id="keyed")
    assert missing["status"] == "errored" and missing["reason"] == "boot_failed"
    assert missing["error"]["sandbox_error"]["step"] == "required_env" and "AGENT_KEY" in missing["error"]["message"]

    run = await run_spec(api, spec_id="keyed", secrets={"AGENT_KEY": "k-123456789"})
    assert run["status"] == "passed", json.dumps(run, indent=1)[:2000]
    response = await api.client.get(run["trajectory_url"])
    text = await response.text()
    assert "k-123456789" not in text and "agentrc" not in json.dumps(json.loads(text)["audit_events"])


async def test_cancel_during_boot_releases_the_sandbox(api, docker_client):
    doc = cli_spec("slow-boot", "true", {"x": inv({"type": "file_exists", "path": "x"})},
                   services=[{"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}}])
    await upload(api, doc)
    queued = await start_run(api, "slow-boot")
    async def in_a_sandbox():
        _, run = await api.get(f"/v1/runs/{queued['id']}")
        return run if run["sandbox_id"] else None
    run = await wait_for(in_a_sandbox, timeout=30, what="the run to get a sandbox", interval=0.02)
    response, sandbox = await api.get(f"/v1/sandboxes/{run['sandbox_id']}")
    assert sandbox["state"] == "creating"
    response, cancelled = await api.post(f"/v1/runs/{queued['id']}/cancel")
    assert cancelled["status"] == "errored" and cancelled["reason"] == "cancelled"
    response, sandbox = await api.get(f"/v1/sandboxes/{run['sandbox_id']}")
    assert sandbox["state"] == "stopped", sandbox  # a cancelled boot is stopped, not failed
    assert_released(docker_client, run["sandbox_id"])


async def test_run_waits_for_sandbox_capacity(stock_images):
    from tests.support.api import start_api, stop_api

    small = await start_api(max_sandboxes=1)
    try:
        doc = cli_spec("capacity", "touch x", {"x": inv({"type": "file_exists", "path": "x"})})
        await upload(small, doc)
        response, blocker = await small.post("/v1/sandboxes", json={"spec_id": "capacity"})
        assert response.status == 201
        queued = await start_run(small, "capacity")
        await asyncio.sleep(1.0)
        response, run = await small.get(f"/v1/runs/{queued['id']}")
        assert run["status"] == "queued" and run["sandbox_id"] is None  # waiting, not failed
        await small.delete(f"/v1/sandboxes/{blocker['id']}")
        run = await wait_run(small, queued["id"])
        assert run["status"] == "passed"
        steps = [e for e in await stream_events(small, run["id"]) if e["type"] == "step"]
        assert [s["step"] for s in steps] == list(range(1, len(steps) + 1)) and steps[0]["action"] == "boot"
    finally:
        await stop_api(small)


class OneAtATime(SvcdProcess):
    """A real svcd subprocess that runs one scenario at a time, so a second run waits queued."""

    def env(self) -> dict[str, str]:
        return {**super().env(), "SERVICE_MAX_CONCURRENT_RUNS": "1"}


async def test_sigkilled_daemon_finishes_a_queued_run(stock_images):
    with short_dir() as home:
        svcd = OneAtATime(home)
        await svcd.start()
        try:
            doc = tiny_spec("slow-run", agent="sleep 4; echo ok > ok.txt")
            status, _ = await svcd.request("POST", "/v1/specs", {"name": "slow-run", "yaml": yaml.safe_dump(doc)})
            assert status == 201
            _, first = await svcd.request("POST", "/v1/runs", {"spec_id": "slow-run"})
            _, second = await svcd.request("POST", "/v1/runs", {"spec_id": "slow-run"})

            async def first_running():
                _, run = await svcd.request("GET", f"/v1/runs/{first['id']}")
                return run["status"] == "running"
            await wait_for(first_running, timeout=60, what="the first run to start")
            svcd.kill(signal.SIGKILL)  # the second run is still queued behind the first

            await svcd.start()

            async def finished(run_id: str):
                _, run = await svcd.request("GET", f"/v1/runs/{run_id}")
                return run if run["status"] in records.TERMINAL else None
            resumed = await wait_for(lambda: finished(second["id"]), timeout=120, what="the queued run to finish")
            assert resumed["status"] == "passed", resumed
            interrupted = await wait_for(lambda: finished(first["id"]), what="the interrupted run to be closed")
            assert interrupted["reason"] == "daemon_restart", interrupted
        finally:
            if svcd.proc is not None and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)
