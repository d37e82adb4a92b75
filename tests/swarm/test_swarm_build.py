"""Dockerfile bases on the swarm: built once on svcd's own engine (build.py, as locally), pushed from the
manager to the swarm's registry under the tenant's own name and the content tag, and pulled by digest
on whichever node runs the sandbox. A spec with a Dockerfile base passes there; a second daemon (or a
second run) finds the image in the registry by its tag and copies nothing again."""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from client.local_spec import upload_body
from daemon.sandbox.build import TAG_ROOT
from daemon.sandbox.engine.swarm.driver import SwarmDriver
from tests.support.api import start_api, stop_api
from tests.support.runs import start_run, wait_run
from tests.support.swarm import PYTHON, daemon_overrides

pytestmark = pytest.mark.asyncio(loop_scope="module")

TAGS: list[str] = []
GOOD = f"FROM {PYTHON}\nARG GREETING=hi\nRUN echo \"$GREETING\" > /etc/greeting\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(swarm):
    instance = await start_api(**daemon_overrides(swarm))
    yield instance
    await stop_api(instance)
    for tag in TAGS:  # what this module built on this host's engine (the context carries a nonce)
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def write_task(root: Path, spec_id: str) -> Path:
    (root / "env").mkdir(parents=True, exist_ok=True)
    (root / "env" / "Dockerfile").write_text(GOOD)
    (root / "env" / "nonce.txt").write_text(uuid.uuid4().hex)
    doc = {
        "version": 1, "id": spec_id, "description": "a Dockerfile base on the swarm",
        "base": {"build": {"context": "env", "dockerfile": "Dockerfile", "args": {"GREETING": "hello"}}},
        "task": {"prompt": "copy the greeting"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", "cp /etc/greeting greeting.txt"], "timeout": "30s"},
        "invariants": {"greets": {"check": {"type": "file_content", "path": "greeting.txt", "regex": "^hello"}}},
    }
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def built(api, tmp_path_factory):
    """(spec id, the first run, the built tag)."""
    path = write_task(tmp_path_factory.mktemp("swarm-build"), "swarm-built")
    response, record = await api.post("/v1/specs", json=upload_body(path))
    assert response.status == 201, record
    run = await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=300)
    tag = next(t for t in api.manager.driver._published)
    TAGS.append(tag)
    return record["id"], run, tag


async def test_a_dockerfile_spec_passes_on_the_swarm(built):
    _, run, _ = built
    assert (run["status"], run["verdict"]) == ("passed", "pass"), run


async def test_the_image_is_in_the_registry_by_digest_under_the_tenants_name(api, swarm, built):
    _, _, tag = built
    ref = api.manager.driver._published[tag]
    registry, _, rest = ref.partition("/")
    name, _, digest = rest.partition("@sha256:")
    assert (registry, name, len(digest)) == (swarm.registry, tag[len("localhost/"):].rsplit(":", 1)[0], 64), ref
    assert tag.startswith(TAG_ROOT + "t") and name.startswith("svc-build/t"), ref  # the tenant's own prefix, kept


async def test_a_sandbox_on_a_node_runs_the_image_pulled_by_digest(api, swarm, built):
    spec_id, _, tag = built
    response, sandbox = await api.post("/v1/sandboxes", json={"spec_id": spec_id})
    assert response.status == 201, sandbox
    sandbox = await api.wait_state(sandbox["id"], ("ready", "error"), timeout=120)
    try:
        assert sandbox["state"] == "ready", sandbox
        out = await api.run(sandbox["id"], "cat /etc/greeting")
        client = swarm.api_client(swarm.manager, timeout=30)
        try:
            images = {s["Spec"]["Labels"].get("svc.role"): s["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"]
                      for s in client.services(filters={"label": f"svc.sandbox={sandbox['id']}"})}
        finally:
            client.close()
    finally:
        await api.delete(f"/v1/sandboxes/{sandbox['id']}")
    assert (out["stdout"], images.get("agent")) == ("hello\n", api.manager.driver._published[tag]), images


async def test_another_daemon_finds_the_pushed_image_without_copying_it(swarm, built):
    """The tag is the build's content digest: a registry that has it has this very image."""
    _, _, tag = built

    class NoLocalEngine:
        def get_image(self, name):
            raise AssertionError(f"{name} was copied again")

    fresh = SwarmDriver(swarm)
    try:
        ref = await fresh._call(fresh._publish, tag, swarm.registry, NoLocalEngine())
    finally:
        await fresh.close()
    assert "@sha256:" in ref and ref.startswith(f"{swarm.registry}/svc-build/"), ref
