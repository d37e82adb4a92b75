"""Dockerfile bases (`base: {build: {context, dockerfile, args}}`) through the real daemon and engine:
the context is uploaded the way the CLI sends it, the image is built once per content digest and
reused, a changed Dockerfile rebuilds, a failing RUN line fails the boot at step `image` naming that
line, and a FROM that is neither local nor pullable says so."""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from client.local_spec import upload_body
from daemon.appkeys import EVENTS
from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.runs import start_run, wait_run

pytestmark = pytest.mark.asyncio(loop_scope="module")

TAGS: list[str] = []


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images):
    instance = await start_api()
    yield instance
    await stop_api(instance)
    for tag in TAGS:  # every image this module built (each run builds its own: the context carries a nonce)
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def write_task(root: Path, dockerfile: str, spec_id: str, args: dict[str, str] | None = None) -> Path:
    """A spec file with its build context `env/` beside it; the context has a nonce so this
    session builds its own image."""
    (root / "env").mkdir(parents=True, exist_ok=True)
    (root / "env" / "Dockerfile").write_text(dockerfile)
    (root / "env" / "nonce.txt").write_text(uuid.uuid4().hex)
    doc = {
        "version": 1, "id": spec_id, "description": "a Dockerfile base",
        "base": {"build": {"context": "env", "dockerfile": "Dockerfile", "args": args or {}}},
        "task": {"prompt": "copy the greeting"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", "cp /etc/greeting greeting.txt"], "timeout": "30s"},
        "invariants": {"greets": {"check": {"type": "file_content", "path": "greeting.txt", "regex": "^hello"}}},
    }
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


async def upload(api, path: Path, expect: int = 201) -> dict:
    response, body = await api.post("/v1/specs", json=upload_body(path))
    assert response.status == expect, body
    return body


async def run_once(api, spec_id: str) -> tuple[dict, list[dict]]:
    run = await wait_run(api, (await start_run(api, spec_id))["id"], timeout=300)
    events = api.app[EVENTS].history.get(f"sandbox:{run['sandbox_id']}", [])
    image = [e["data"] for e in events if e["event_type"] == "status" and e["data"].get("step") == "image"]
    return run, image


GOOD = f"FROM {PYTHON}\nARG GREETING=hi\nRUN echo \"$GREETING\" > /etc/greeting\n"


async def test_a_dockerfile_base_runs_twice_with_one_build(api, tmp_path):
    path = write_task(tmp_path, GOOD, "built-twice", {"GREETING": "hello"})
    record = await upload(api, path)
    assert sorted(f["path"] for f in record["files"]) == ["env/Dockerfile", "env/nonce.txt"]
    first, first_image = await run_once(api, record["id"])
    second, second_image = await run_once(api, record["id"])
    TAGS.append(first_image[-1]["image"])
    # the first run streamed the build's log on the sandbox's lifecycle stream; the second built nothing
    assert (first["verdict"], second["verdict"], first_image[-1]["built"], second_image[-1]["built"],
            any("RUN echo" in e.get("line", "") for e in first_image), any("line" in e for e in second_image)) == (
        "pass", "pass", True, False, True, False), (first, second_image)


async def test_a_changed_dockerfile_rebuilds(api, tmp_path):
    path = write_task(tmp_path, GOOD, "built-changed", {"GREETING": "hello"})
    record = await upload(api, path)
    _, before = await run_once(api, record["id"])
    (tmp_path / "env" / "Dockerfile").write_text(GOOD.replace("$GREETING", "$GREETING again"))
    record = await upload(api, path)
    run, after = await run_once(api, record["id"])
    TAGS.extend([before[-1]["image"], after[-1]["image"]])
    assert (run["verdict"], after[-1]["built"], after[-1]["image"] != before[-1]["image"]) == ("pass", True, True), after


async def test_a_broken_run_line_fails_the_boot_naming_that_line(api, tmp_path):
    dockerfile = f"FROM {PYTHON}\n# a comment\nRUN echo fine\nRUN echo broken && exit 3\n"
    record = await upload(api, write_task(tmp_path, dockerfile, "built-broken"))
    run = await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=300)
    error = run["error"]["sandbox_error"]
    assert (run["status"], error["step"]) == ("errored", "image"), run["error"]
    assert "Dockerfile line 4: RUN echo broken && exit 3" in error["message"], error


async def test_a_from_that_is_neither_local_nor_pullable_says_so(api, tmp_path):
    dockerfile = "FROM localhost/svc-test/absent:1\nRUN true\n"
    record = await upload(api, write_task(tmp_path, dockerfile, "built-no-from"))
    run = await wait_run(api, (await start_run(api, record["id"]))["id"], timeout=300)
    message = run["error"]["sandbox_error"]["message"]
    assert "Dockerfile line 1: FROM localhost/svc-test/absent:1: it is not on this engine" in message, run


async def test_a_dockerfile_base_is_pooled_under_its_digest(stock_images, tmp_path):
    """The warm pool keeps sandboxes of the built image (its tag, with the digest, is in the shape key)."""
    from tests.support.waiting import wait_for

    pool_api = await start_api(pool_size=1)
    try:
        path = write_task(tmp_path, GOOD, "built-pooled", {"GREETING": "hello"})
        record = await upload(pool_api, path)
        response, cold = await pool_api.post("/v1/sandboxes", json={"spec_id": record["id"]})
        assert response.status == 201, cold

        async def pooled() -> bool:
            return any(pool_api.manager.pool.ready.values()) or None

        await wait_for(pooled, timeout=120, what="a pooled sandbox of the built shape")
        response, warm = await pool_api.post("/v1/sandboxes", json={"spec_id": record["id"]})
        out = await pool_api.run(warm["id"], "cat /etc/greeting")
        TAGS.append(cold["image"])
        assert (cold["boot"]["pooled"], warm["boot"]["pooled"], warm["image"], out["stdout"]) == (
            False, True, cold["image"], "hello\n"), (cold, warm)
    finally:
        await stop_api(pool_api)


async def test_eval_run_shows_the_build_log_in_its_progress(api, tmp_path):
    import asyncio
    import contextlib
    import io

    from client.cli import main

    path = write_task(tmp_path, GOOD, "built-progress", {"GREETING": "hello"})
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return main(["--base-url", api.base_url(), "--api-key", api.key, "eval", "run", str(path), "--poll", "0.2s"])

    code = await asyncio.to_thread(call)
    lines = [line for line in err.getvalue().splitlines() if ": build: " in line or " built" in line]
    TAGS.append(lines[-1].split(" image ")[-1].split()[0] if lines else "")
    assert (code, any("RUN echo" in line for line in lines), lines[-1].endswith(" built") if lines else None) == (
        0, True, True), err.getvalue()[-3000:]
