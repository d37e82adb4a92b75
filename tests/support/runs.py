"""Helpers for the run and check tests against the real engine (tests/docker/test_runs*.py,
test_checks*.py, test_evidence.py, ...): upload specs and snapshots, run and wait, replay from the reproducer through the
real `svc` CLI, read the stream, a fake OpenAI-compatible judge and a webhook receiver."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shlex
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.api import Api
from tests.support.specs import cli_spec, inv  # noqa: F401  (re-exported: run tests build specs with them)
from tests.support.sse import read_sse_data
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]  # the checkout
TERMINAL = ("passed", "failed", "errored")


async def upload(api: Api, doc: dict[str, Any]) -> dict[str, Any]:
    return await api.upload_doc(doc)


async def wait_run(api: Api, run_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response, run = await api.get(f"/v1/runs/{run_id}")
        assert response.status == 200, run
        if run["status"] in TERMINAL:
            return run
        assert time.monotonic() < deadline, f"run {run_id} still {run['status']} after {timeout}s"
        await asyncio.sleep(0.1)


async def start_run(api: Api, spec_id: str, **body: Any) -> dict[str, Any]:
    response, run = await api.post("/v1/runs", json={"spec_id": spec_id, **body})
    assert response.status == 202, run
    assert run["status"] == "queued"
    return run


async def wait_run_in_sandbox(api: Api, run_id: str, *, status: str | None = None, timeout: float = 60) -> dict[str, Any]:
    """Poll until the run's agent is running inside its sandbox (and the run has `status`, when
    given); returns the run."""
    async def check():
        response, run = await api.get(f"/v1/runs/{run_id}")
        assert response.status == 200, run
        runtime = api.manager.runtime(run["sandbox_id"]) if run["sandbox_id"] else None
        ok = runtime is not None and runtime.state == "running" and (status is None or run["status"] == status)
        return run if ok else None

    return await wait_for(check, timeout=timeout, what=f"run {run_id} running in its sandbox")


async def run_spec(api: Api, doc: dict[str, Any] | None = None, spec_id: str | None = None, **body: Any) -> dict[str, Any]:
    if doc is not None:
        spec_id = (await upload(api, doc))["id"]
    run = await start_run(api, spec_id, **body)
    return await wait_run(api, run["id"])


def statuses(run: dict[str, Any]) -> dict[str, str]:
    return {r["invariant_id"]: r["status"] for r in run["invariant_results"] + run["forbidden_results"]}


def result(run: dict[str, Any], invariant_id: str) -> dict[str, Any]:
    return next(r for r in run["invariant_results"] + run["forbidden_results"] if r["invariant_id"] == invariant_id)


def base_url(api: Api) -> str:
    return api.base_url()


async def replay_with_cli(api: Api, run: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Paste the run's reproducer into the real CLI (in a thread: the daemon runs on this loop);
    returns (exit code, the replayed Run it printed)."""
    from client.cli import main

    command = run["reproducer"]["command"]
    argv = shlex.split(command)
    assert argv[:3] == ["svc", "runs", "create"], command
    out = io.StringIO()

    def call() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            return main(["--base-url", base_url(api), "--api-key", api.key, *argv[1:], "--quiet"])

    code = await asyncio.to_thread(call)
    return code, json.loads(out.getvalue())


async def stream_events(api: Api, run_id: str, timeout: float = 120) -> list[dict[str, Any]]:
    response = await api.client.get(f"/v1/runs/{run_id}/stream", headers=api.headers())
    assert response.status == 200, await response.text()
    return await read_sse_data(response, timeout)


class FakeJudge:
    """A real local HTTP server speaking the OpenAI chat completions wire format. `mode`:
    a score (float), "down" (500), "limited" (429) or "garbage" (200 with a malformed answer)."""

    def __init__(self):
        self.mode: Any = 0.9
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({"body": body, "auth": request.headers.get("Authorization")})
        if self.mode == "down":
            return web.json_response({"error": {"message": "upstream exploded"}}, status=500)
        if self.mode == "limited":
            return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"})
        content = "I think it is fine, probably." if self.mode == "garbage" else json.dumps(
            {"score": self.mode, "reason": f"graded {self.mode}"})
        return web.json_response({
            "id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        })

    async def start(self) -> "FakeJudge":
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


class Receiver:
    """A local webhook receiver."""

    def __init__(self):
        self.calls: list[dict[str, Any]] = []
        self.got = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.calls.append({"headers": dict(request.headers), "body": await request.read()})
        self.got.set()
        return web.Response(text="ok")

    async def start(self) -> "Receiver":
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def upload_agent(api: Api, name: str, directory: Path, entrypoint: list[str]) -> dict[str, Any]:
    from client.commands.agents import pack_directory

    form = aiohttp.FormData()
    form.add_field("metadata", json.dumps({"name": name, "entrypoint": entrypoint}), content_type="application/json")
    form.add_field("bundle", pack_directory(directory), filename="b.tar.gz", content_type="application/gzip")
    response, body = await api.post("/v1/agents", data=form)
    assert response.status == 201, body
    return body
