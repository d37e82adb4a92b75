"""The MCP tools that close an editor agent's loop: svc_spec_validate, svc_agents_upload, svc_runs_get and
svc_runs_replay (a recorded run replays without its provider key), driven by the official MCP client against
the real daemon app on a real socket."""
from __future__ import annotations

import json
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web
from mcp.shared.memory import create_connected_server_and_client_session

from client.api import Client
from client.config import ClientConfig, read_env_file
from client.mcp_server import build_server
from client.routes import R
from daemon.app import create_app
from daemon.appkeys import DEFAULT_TENANT_ID, SETTINGS, STORE
from daemon.runner import records
from daemon.traces import gateway
from tests.support.specs import RECORDED_SPEC as SPEC
from tests.support.api import make_settings
from tests.support.homes import short_home

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def daemon(home: Path):
    settings = make_settings(home)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(settings.socket_path)).start()
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    client = Client(ClientConfig(base_url=f"unix://{settings.socket_path}", api_key=key, timeout=10, home=home, api_key_source="test"))
    try:
        yield client, app
    finally:
        await client.close()
        await runner.cleanup()


async def call(session, tool: str, arguments: dict):
    result = await session.call_tool(tool, arguments)
    return result.isError, (json.loads(result.content[0].text) if not result.isError else result.content[0].text)


async def test_spec_validate_answers_every_problem_with_its_line(tmp_path):
    async with daemon(short_home("svc-mcp-")) as (client, _):
        async with create_connected_server_and_client_session(build_server(client)) as session:
            failed, ok = await call(session, "svc_spec_validate", {"spec_path": str(ROOT / "examples" / "quickstart.yaml")})
            assert not failed and ok["ok"] and ok["spec_id"] == "quickstart" and ok["invariants"] >= 1
            failed, broken = await call(session, "svc_spec_validate", {"spec_path": str(ROOT / "examples" / "broken.yaml")})
            assert not failed and broken["ok"] is False
            assert {(e["loc"], e["line"], e["column"]) for e in broken["errors"]} >= {("agent.timout", 14, 3)}
            unfilled = tmp_path / "unfilled.yaml"
            unfilled.write_text((ROOT / "examples" / "quickstart.yaml").read_text().replace("Count the users", "Count {{ c }} users", 1))
            failed, report = await call(session, "svc_spec_validate", {"spec_path": str(unfilled)})
            assert not failed and report["ok"] is False and [e["loc"] for e in report["errors"]] == ["task.prompt"]
            assert report["errors"][0]["msg"].startswith("{{ c }} is not filled by task.inputs or any matrix entry"), report
            failed, text = await call(session, "svc_spec_validate", {"spec_path": str(tmp_path / "nope.yaml")})
            assert failed and "nope.yaml" in text
            failed, text = await call(session, "svc_spec_validate", {"spec": "x.yaml"})
            assert failed and "unknown argument 'spec'" in text


async def test_agents_upload_then_runs_get_and_a_recorded_replay_without_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv("SVC_TEST_PROVIDER_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    agent = tmp_path / "my-agent"
    agent.mkdir()
    (agent / "agent.py").write_text("print('hi')\n")
    async with daemon(short_home("svc-mcp-")) as (client, app):
        async with create_connected_server_and_client_session(build_server(client)) as session:
            failed, snapshot = await call(session, "svc_agents_upload",
                                          {"name": "my-agent", "bundle": str(agent), "entrypoint": "python3 agent.py"})
            assert not failed, snapshot
            assert snapshot["name"] == "my-agent" and snapshot["version"] == 1 and snapshot["id"]

            await client.call(R.UPLOAD_SPEC, body={"name": "recorded", "yaml": SPEC})
            tenant, store = app[DEFAULT_TENANT_ID], app[STORE]
            digest = gateway.recordings(app[SETTINGS], tenant).put_bytes(b'{"seq": 1}\n')
            run_id = records.new_run_id()
            await records.insert(store, run_id=run_id, tenant_id=tenant, spec_id="recorded", spec_version=1, seed="s1",
                                 status="failed")
            await records.update(store, run_id, models="live", model_recording=digest,
                                 pins=json.dumps({"model_recording": digest}))

            failed, run = await call(session, "svc_runs_get", {"run_id": run_id})
            assert not failed and run["id"] == run_id and run["status"] == "failed"
            failed, text = await call(session, "svc_runs_get", {"run_id": "run_missing"})
            assert failed and "404" in text

            failed, replay = await call(session, "svc_runs_replay", {"run_id": run_id})
            assert not failed, replay
            assert replay["replay_of"] == run_id and (replay.get("models") or {}).get("mode") == "replayed"
            failed, text = await call(session, "svc_runs_replay", {"run_id": run_id, "models": "live"})
            assert failed and "SVC_TEST_PROVIDER_KEY" in text
            failed, text = await call(session, "svc_runs_replay", {"run": run_id})
            assert failed and "unknown argument 'run'" in text
