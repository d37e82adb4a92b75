"""Snapshot `auth.egress` (host -> ports) reaches the sandbox's egress policy: a run of a snapshot
agent whose auth.egress names a host reaches it through the proxy; the same agent without it gets
no proxy and no route out at all; a spec that explicitly allows no outside host (`allow: []`)
keeps the entry out and says so. A target HTTP server runs in a container of
this machine; nothing is sent beyond it.

The target joins the sandbox's outside network (`svc-<id>-egress`, which only exists when the
policy lets something out) under the name `target.test` once the run's sandbox has it, so the agent
retries while the proxy cannot resolve the name yet (502) and stops at 200 or 403."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.support.images import PYTHON
from tests.support.released import released_soon
from tests.support.runs import start_run, upload, wait_run
from tests.support.specs import inv, spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

PY = PYTHON

AGENT = """\
code=000
for i in $(seq 1 120); do
  code=$(curl -sS -m 3 -o /dev/null -w '%{http_code}' http://target.test:8080/hostname 2>/dev/null)
  case "$code" in 200|403) break ;; esac
  [ -n "$HTTP_PROXY" ] || break  # no egress proxy: nothing to wait for
  sleep 0.25
done
echo "$code" > result.txt
curl -sS -m 3 -o /dev/null -w '%{http_code}' http://target.test:8081/ > other_port.txt 2>/dev/null
"""


@pytest.fixture(scope="module")
def target(docker_client, stock_images):
    run = uuid.uuid4().hex[:8]
    labels = {"svc.test": "1", "svc.test.run": run}
    net = docker_client.networks.create(f"svc-snapegress-target-{run}", driver="bridge", internal=True, labels=labels)
    c = docker_client.containers.run(PY, ["python3", "-m", "http.server", "8080", "--directory", "/etc"], detach=True,
                                     labels=labels, network=net.name)
    try:
        yield c
    finally:
        c.remove(force=True)
        net.remove()


async def upload_snapshot(api, name: str, directory: Path, auth: dict | None) -> dict:
    from client.commands.agents import pack_directory

    metadata = {"name": name, "entrypoint": ["sh", "agent.sh"], **({"auth": auth} if auth else {})}
    form = aiohttp.FormData()
    form.add_field("metadata", json.dumps(metadata), content_type="application/json")
    form.add_field("bundle", pack_directory(directory), filename="b.tar.gz", content_type="application/gzip")
    response, body = await api.post("/v1/agents", data=form)
    assert response.status == 201, body
    return body


def snapshot_spec(spec_id: str, snapshot: str, **blocks) -> dict:
    doc = spec(spec_id, invariants={
        "reached": inv({"type": "file_content", "path": "result.txt", "regex": "^200$"}),
        # auth.egress names ports: another port of the same host stays refused by the policy
        "other_port_refused": inv({"type": "file_content", "path": "other_port.txt", "regex": "^403$"}),
    }, **blocks)
    doc["agent"] = {"type": "snapshot", "snapshot": snapshot, "timeout": "60s"}
    return doc


async def run_joining_target(api, docker_client, container, spec_id: str) -> dict:
    """Start a run; once its sandbox has an outside network, the target joins it as target.test
    (and leaves once the run is over: a foreign endpoint keeps the teardown from removing it)."""
    queued = await start_run(api, spec_id)
    joined = None

    async def over_after_joining() -> bool:
        nonlocal joined
        _, run = await api.get(f"/v1/runs/{queued['id']}")
        if run["status"] in ("passed", "failed", "errored"):
            return True
        sid = run.get("sandbox_id")
        if sid and joined is None:
            try:
                docker_client.api.connect_container_to_network(container.id, f"svc-{sid}-egress", aliases=["target.test"])
                joined = sid
            except Exception:  # not created yet (or never, when nothing may leave)
                pass
        return False

    await wait_for(over_after_joining, timeout=90, what="the run to finish", interval=0.1)
    run = await wait_run(api, queued["id"])
    run["_joined"] = joined
    if joined:
        # A foreign endpoint keeps a network from being removed: the target leaves, and the
        # sandbox's teardown (after the verdict, in the background) removes the network itself.
        docker_client.networks.get(f"svc-{joined}-egress").disconnect(container, force=True)
    return run


async def audit_events(api, run: dict) -> list[dict]:
    response = await api.client.get(run["trajectory_url"])
    assert response.status == 200
    return json.loads(await response.text())["audit_events"]


async def test_snapshot_egress_reaches_the_host_and_without_it_is_refused(api, target, docker_client, tmp_path):
    (tmp_path / "agent.sh").write_text(AGENT)
    await upload_snapshot(api, "egress-allowed", tmp_path, {"egress": {"target.test": ["8080"]}})
    await upload_snapshot(api, "egress-plain", tmp_path, None)
    await upload(api, snapshot_spec("snap-egress-allowed", "egress-allowed"))
    await upload(api, snapshot_spec("snap-egress-plain", "egress-plain"))

    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"  # the target has a private address (tests only)
    try:
        allowed = await run_joining_target(api, docker_client, target, "snap-egress-allowed")
        plain = await run_joining_target(api, docker_client, target, "snap-egress-plain")
    finally:
        del os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"]

    # auth.egress target.test:8080 joined the allowlist: the proxy got an outside network and let it through
    assert allowed["status"] == "passed", json.dumps(allowed, indent=1)[:3000]
    assert allowed["_joined"] == allowed["sandbox_id"]
    await released_soon(docker_client, allowed["sandbox_id"])

    # without it the spec's default deny holds: no proxy, no outside network, the host unreachable
    assert plain["status"] == "failed", json.dumps(plain, indent=1)[:3000]
    assert plain["_joined"] is None
    reached = next(r for r in plain["invariant_results"] if r["invariant_id"] == "reached")
    assert reached["status"] == "failed"
    await released_soon(docker_client, plain["sandbox_id"])


async def test_explicit_empty_allow_list_drops_snapshot_egress(api, target, docker_client, tmp_path):
    (tmp_path / "agent.sh").write_text(AGENT)
    await upload_snapshot(api, "egress-closed", tmp_path, {"egress": {"target.test": ["8080"]}})
    await upload(api, snapshot_spec("snap-egress-closed", "egress-closed",
                                    network={"egress": {"default": "deny", "allow": []}}))
    run = await run_joining_target(api, docker_client, target, "snap-egress-closed")
    assert run["status"] == "failed", json.dumps(run, indent=1)[:3000]
    assert run["_joined"] is None
    events = await audit_events(api, run)
    dropped = [e["details"] for e in events if e["type"] == "warning" and e["details"].get("kind") == "snapshot_egress_dropped"]
    assert dropped and dropped[0]["hosts"] == ["target.test:8080"], events
    await released_soon(docker_client, run["sandbox_id"])
