"""A Dockerfile base is hostile input, built like a sandbox runs: `ADD <url>` (fetched by the engine in
the host's network namespace, loopback services included), `RUN --mount` (cache mounts shared by every
build of the engine) and images named by address literals are refused at upload naming the Dockerfile
line; a spec's `base` naming a loopback registry never reaches the engine and no registry's answer is
quoted back; RUN steps have no network (the host's docker0 address and loopback servers are out of
reach), a time limit and the operator's pids cap; built tags are per tenant, so tenant B cannot boot
tenant A's built image by name. Each loopback server here records what reached it."""
from __future__ import annotations

import os

import asyncio
import base64
import http.server
import secrets
import subprocess
import threading
import time

import pytest
import yaml

from pathlib import Path

from daemon.config import Settings
from daemon.sandbox import build
from tests.support.api import Api, start_api, stop_api
from tests.support.images import PYTHON

ANSWER = "loopback-only-answer-7f3a"


class Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:  # noqa: N802
        type(self).hits.append(self.path)
        body = ANSWER.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class Server:
    """An HTTP server on `host` answering ANSWER and recording every path asked."""

    def __init__(self, host: str = "127.0.0.1"):
        self.hits: list[str] = []
        handler = type("Handler", (Recorder,), {"hits": self.hits})
        self.httpd = http.server.ThreadingHTTPServer((host, 0), handler)
        self.host, self.port = host, self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def loopback():
    server = Server()
    yield server
    server.close()


def docker0() -> str:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True).stdout.split()
    return out[out.index("inet") + 1].split("/")[0] if "inet" in out else "172.17.0.1"


def built_spec(spec_id: str, **extra) -> dict:
    return {"version": 1, "id": spec_id, "base": {"build": {"context": "env"}}, "task": {"prompt": "p"},
            "agent": {"type": "cli", "binary": "true"},
            "invariants": {"ok": {"check": {"type": "command_exit", "command": "true"}}}, **extra}


async def upload(api: Api, doc: dict, files: dict[str, bytes] | None = None, key: str | None = None) -> tuple[int, dict]:
    body = {"name": doc["id"], "yaml": yaml.safe_dump(doc),
            "files": {path: base64.b64encode(data).decode() for path, data in (files or {}).items()}}
    response, answer = await api.post("/v1/specs", json=body, **({"key": key} if key else {}))
    return response.status, answer


async def run_to_end(api: Api, spec_id: str, key: str | None = None, timeout: float = 240) -> dict:
    extra = {"key": key} if key else {}
    response, run = await api.post("/v1/runs", json={"spec_id": spec_id}, **extra)
    assert response.status == 202, run
    deadline = time.monotonic() + timeout
    while True:
        response, run = await api.get(f"/v1/runs/{run['id']}", **extra)
        if run["status"] in ("passed", "failed", "errored", "cancelled") or time.monotonic() > deadline:
            return run
        await asyncio.sleep(0.5)


# --- refused at upload, naming the Dockerfile's line ----------------------------------------------


async def test_add_of_a_loopback_url_is_refused_at_upload(api, loopback):
    dockerfile = f"FROM {PYTHON}\nADD http://127.0.0.1:{loopback.port}/secret /leaked\n"
    status, body = await upload(api, built_spec("bh-add-url"), {"env/Dockerfile": dockerfile.encode()})
    assert (status, "Dockerfile line 2: ADD http://127.0.0.1" in body["message"], loopback.hits) == (400, True, []), body


async def test_add_of_a_git_source_or_a_url_in_an_arg_is_refused(api):
    dockerfile = (f"ARG SRC=http://169.254.169.254/latest/meta-data/\nFROM {PYTHON}\nADD git@github.com:a/b.git /r\n"
                  "ADD $SRC /m\n")
    status, body = await upload(api, built_spec("bh-add-git"), {"env/Dockerfile": dockerfile.encode()})
    lines = sorted(e["msg"].split(":")[0] for e in body["details"]["errors"])
    assert (status, lines) == (400, ["Dockerfile line 3", "Dockerfile line 4"]), body


async def test_a_cache_mount_is_refused_at_upload(api):
    dockerfile = f"FROM {PYTHON}\nRUN --mount=type=cache,id=shared,target=/root/.cache echo planted > /root/.cache/x\n"
    status, body = await upload(api, built_spec("bh-cache"), {"env/Dockerfile": dockerfile.encode()})
    assert (status, "Dockerfile line 2: RUN --mount is not supported" in body["message"]) == (400, True), body


@pytest.mark.parametrize("ref", ["127.0.0.1:{port}/x:1", "[::1]:{port}/x:1", "169.254.169.254/x:1", "10.1.2.3:{port}/x",
                                 "[fd00:ec2::254]/x:1"])
async def test_a_from_or_copy_from_naming_a_private_address_is_refused_at_upload(api, loopback, ref):
    ref = ref.format(port=loopback.port)
    dockerfile = f"FROM {PYTHON} AS one\nCOPY --from={ref} /etc/passwd /p\nFROM {ref}\n"
    status, body = await upload(api, built_spec("bh-from-literal"), {"env/Dockerfile": dockerfile.encode()})
    lines = sorted(e["msg"].split(":")[0] for e in body["details"]["errors"])
    assert (status, lines, loopback.hits) == (400, ["Dockerfile line 2", "Dockerfile line 3"], []), body


# --- on the real engine -------------------------------------------------------------------------


@pytest.mark.asyncio(loop_scope="module")
async def test_a_base_naming_a_loopback_registry_never_reaches_it(engine_api, loopback):
    doc = built_spec(f"bh-base-{secrets.token_hex(3)}")
    doc["base"] = f"127.0.0.1:{loopback.port}/svc/probe:1"
    status, body = await upload(engine_api, doc)
    assert status == 201, body
    run = await run_to_end(engine_api, doc["id"])
    message = run["error"]["sandbox_error"]["message"]
    assert (run["status"], "loopback, link-local or private" in message, ANSWER in message, loopback.hits) == (
        "errored", True, False, []), run["error"]


@pytest.mark.asyncio(loop_scope="module")
async def test_a_base_from_a_registry_not_allowed_is_not_pulled(engine_api, loopback):
    # a host name that is this host: the engine would pull from the loopback server
    doc = built_spec(f"bh-base-name-{secrets.token_hex(3)}")
    doc["base"] = f"localhost:{loopback.port}/svc/probe:1"
    status, body = await upload(engine_api, doc)
    assert status == 201, body
    run = await run_to_end(engine_api, doc["id"])
    message = run["error"]["sandbox_error"]["message"]
    assert (run["status"], "is this host" in message, ANSWER in message, loopback.hits) == ("errored", True, False, []), message


@pytest.mark.asyncio(loop_scope="module")
async def test_a_run_step_reaches_neither_docker0_nor_loopback(engine_api, tmp_path):
    server = Server(docker0())
    try:
        probe = (f"import urllib.request as u\nfor url in ['http://{server.host}:{server.port}/docker0', "
                 f"'http://127.0.0.1:{server.port}/lo']:\n    try: u.urlopen(url, timeout=3)\n    except Exception as e: print('blocked', e)\n")
        dockerfile = f"FROM {PYTHON}\nCOPY probe.py /probe.py\nRUN --network=host python /probe.py {secrets.token_hex(4)}\n"
        doc = built_spec(f"bh-net-{secrets.token_hex(3)}")
        status, body = await upload(engine_api, doc, {"env/Dockerfile": dockerfile.encode(), "env/probe.py": probe.encode()})
        assert status == 201, body
        run = await run_to_end(engine_api, doc["id"])
        assert (run["status"], server.hits) == ("passed", []), run.get("error")
    finally:
        server.close()


@pytest.mark.asyncio(loop_scope="module")
async def test_tenant_b_cannot_boot_tenant_a_built_image_by_name(engine_api):
    spec_id = f"bh-victim-{secrets.token_hex(3)}"
    dockerfile = f"FROM {PYTHON}\nRUN echo tenant-a-secret > /secret\n"
    status, body = await upload(engine_api, built_spec(spec_id), {"env/Dockerfile": dockerfile.encode()})
    assert status == 201, body
    assert (await run_to_end(engine_api, spec_id))["status"] == "passed"
    tags = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                          text=True).stdout.split()
    tag = next(t for t in tags if spec_id in t)
    response, tenant = await engine_api.post("/v1/tenants", json={"name": f"b-{secrets.token_hex(3)}"})
    assert response.status == 201, tenant
    other = tenant["key"]["secret"]
    doc = built_spec("bh-thief")
    doc["base"] = tag
    doc["invariants"] = {"ok": {"check": {"type": "command_exit", "command": "test ! -e /secret"}}}
    status, body = await upload(engine_api, doc, key=other)
    assert status == 201, body
    run = await run_to_end(engine_api, "bh-thief", key=other)
    assert (run["status"], "not one of this tenant's built images" in str(run.get("error"))) == ("errored", True), run


@pytest.mark.asyncio(loop_scope="module")
async def test_a_build_past_the_operator_time_limit_fails(stock_images):
    api = await start_api(build_timeout_s=8)
    try:
        dockerfile = f"FROM {PYTHON}\nRUN sleep 60 # {secrets.token_hex(4)}\n"
        doc = built_spec(f"bh-slow-{secrets.token_hex(3)}")
        status, body = await upload(api, doc, {"env/Dockerfile": dockerfile.encode()})
        assert status == 201, body
        started = time.monotonic()
        run = await run_to_end(api, doc["id"], timeout=100)
        message = run["error"]["sandbox_error"]["message"]
        assert (run["status"], "did not finish within 8s" in message, time.monotonic() - started < 60) == (
            "errored", True, True), message
    finally:
        await stop_api(api)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_fork_bomb_in_a_run_step_meets_the_pids_cap(stock_images):
    if not build.limit_buildkit_cgroup(Settings(home=Path("/nonexistent"), build_memory=0, build_cpus=0)):
        message = "the engine's BuildKit cgroup is not writable from here (a remote or systemd-driver engine)"
        if os.environ.get("CI"):  # CI's engine is local with cgroupfs: the cap must be shown there
            pytest.fail(message)
        pytest.skip(message)
    api = await start_api(build_pids=200)
    try:
        bomb = "import subprocess\nps = [subprocess.Popen(['sleep', '20']) for _ in range(400)]\nprint('forked', len(ps))\n"
        dockerfile = f"FROM {PYTHON}\nCOPY bomb.py /bomb.py\nRUN python /bomb.py {secrets.token_hex(4)}\n"
        doc = built_spec(f"bh-pids-{secrets.token_hex(3)}")
        status, body = await upload(api, doc, {"env/Dockerfile": dockerfile.encode(), "env/bomb.py": bomb.encode()})
        assert status == 201, body
        run = await run_to_end(api, doc["id"], timeout=120)
        message = run["error"]["sandbox_error"]["message"]
        assert (run["status"], "Dockerfile line 3" in message) == ("errored", True), message
    finally:
        await stop_api(api)
        build.limit_buildkit_cgroup(Settings(home=Path("/nonexistent")))  # the default caps back
