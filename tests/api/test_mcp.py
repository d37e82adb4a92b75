"""The MCP server, driven by the official MCP client, against the real daemon app on a real socket."""
from __future__ import annotations

import json

import pytest
from aiohttp import web
from mcp.shared.memory import create_connected_server_and_client_session

from client.api import Client
from client.config import ClientConfig, read_env_file
from client.mcp_server import build_server
from daemon.app import create_app
from tests.support.api import make_settings
from tests.support.homes import short_home

TOOLS = {
    "svc_eval_run", "svc_eval_list", "svc_eval_get", "svc_eval_metrics", "svc_eval_compare",
    "svc_logs_traces", "svc_logs_trace", "svc_logs_spans", "svc_logs_scenarios", "svc_logs_scores",
}


@pytest.fixture
async def daemon_client(tmp_path):

    home = short_home("svc-mcp-")
    settings = make_settings(home)
    runner = web.AppRunner(create_app(settings))
    await runner.setup()
    await web.UnixSite(runner, str(settings.socket_path)).start()
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    client = Client(ClientConfig(base_url=f"unix://{settings.socket_path}", api_key=key, timeout=10, home=home, api_key_source="test"))
    yield client
    await client.close()
    await runner.cleanup()


async def test_lists_every_tool_with_input_schemas(daemon_client):
    async with create_connected_server_and_client_session(build_server(daemon_client)) as session:
        tools = (await session.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        traces = next(t for t in tools if t.name == "svc_logs_traces")
        assert {"experiment_id", "event_type", "tool", "since"} <= set(traces.inputSchema["properties"])


async def test_api_errors_become_tool_errors_naming_the_problem(daemon_client):
    async with create_connected_server_and_client_session(build_server(daemon_client)) as session:
        result = await session.call_tool("svc_eval_get", {"experiment_id": "exp-missing"})
        assert result.isError
        assert "404" in result.content[0].text


async def test_eval_run_reports_a_missing_spec_file(daemon_client, tmp_path):
    async with create_connected_server_and_client_session(build_server(daemon_client)) as session:
        result = await session.call_tool("svc_eval_run", {"spec_path": str(tmp_path / "nope.yaml")})
        assert result.isError and "nope.yaml" in result.content[0].text


async def test_eval_run_resolves_secrets_locally_and_uploads_fixture_files(tmp_path):
    """svc_eval_run goes through the client's one resolver and uploads the files fixtures name."""

    from tests.support.experiments import FakeRunner
    from tests.support.specs import spec_yaml

    home = short_home("svc-mcp-")
    settings = make_settings(home)
    app = create_app(settings)
    runner = FakeRunner()
    app["experiments.run_scenario"] = runner
    site_runner = web.AppRunner(app)
    await site_runner.setup()
    await web.UnixSite(site_runner, str(settings.socket_path)).start()
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    client = Client(ClientConfig(base_url=f"unix://{settings.socket_path}", api_key=key, timeout=10, home=home, api_key_source="test"))
    try:
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "rows.csv").write_text("1,a\n")
        spec = tmp_path / "mcp.yaml"
        spec.write_text(spec_yaml("mcp", extra="fixtures:\n  - {path: data}\nsecrets:\n  TOKEN: \"command:printf from-mcp\"\n"))
        async with create_connected_server_and_client_session(build_server(client)) as session:
            result = await session.call_tool("svc_eval_run", {"spec_path": str(spec)})
            assert not result.isError, result.content[0].text
            assert json.loads(result.content[0].text)["status"] == "completed"
            assert runner.calls[-1]["secrets"] == {"TOKEN": "from-mcp"}
            record = await client.get("/v1/specs/mcp")
            assert [f["path"] for f in record["files"]] == ["data/rows.csv"]
            spec.write_text(spec_yaml("mcp", extra="secrets:\n  TOKEN: \"command:exit 3\"\n"))
            result = await session.call_tool("svc_eval_run", {"spec_path": str(spec)})
            assert result.isError and "secret 'TOKEN'" in result.content[0].text
    finally:
        await client.close()
        await site_runner.cleanup()
