"""The MCP server, driven by the official MCP client, against the real daemon app on a real socket."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web
from mcp.shared.memory import create_connected_server_and_client_session

from client.api import Client
from client.config import ClientConfig, read_env_file
from client.mcp_server import build_server
from daemon.app import create_app
from tests.api.conftest import make_settings

TOOLS = {
    "svc_eval_run", "svc_eval_list", "svc_eval_get", "svc_eval_metrics", "svc_eval_compare",
    "svc_logs_traces", "svc_logs_trace", "svc_logs_spans", "svc_logs_scenarios", "svc_logs_scores",
}


@pytest.fixture
async def daemon_client(tmp_path):
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="svc-mcp-", dir="/tmp"))
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
