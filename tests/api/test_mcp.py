"""The MCP server, driven by the official MCP client, against the real daemon app on a real socket."""
from __future__ import annotations

import json

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from client.mcp_server import build_server
from tests.support.homes import short_home
from tests.support.socket_client import socket_client

TOOLS = {
    "svc_eval_run", "svc_eval_list", "svc_eval_get", "svc_eval_metrics", "svc_eval_compare",
    "svc_logs_traces", "svc_logs_trace", "svc_logs_spans", "svc_logs_scenarios", "svc_logs_scores",
    "svc_spec_validate", "svc_agents_upload", "svc_runs_get", "svc_runs_replay",
}


@pytest.fixture
async def daemon_client(tmp_path):
    async with socket_client(short_home("svc-mcp-")) as client:
        yield client


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

    runner = FakeRunner()
    async with socket_client(short_home("svc-mcp-"), run_scenario=runner) as client:
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


async def test_the_server_reports_svcs_own_version(daemon_client):
    import anyio
    from mcp import ClientSession
    from mcp.shared.memory import create_client_server_memory_streams

    from daemon import __version__

    server = build_server(daemon_client)._mcp_server
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: server.run(*server_streams, server.create_initialization_options()))
            async with ClientSession(*client_streams) as session:
                info = (await session.initialize()).serverInfo
            tasks.cancel_scope.cancel()
    assert (info.name, info.version) == ("svc", __version__)


# a resource named by id is `<resource>_id` in every tool, never the bare resource name
BARE_IDS = {"experiment", "trace", "span", "parent_span", "root_span", "run", "sandbox", "scenario", "rule", "spec", "candidate",
            "baseline"}


async def test_an_id_argument_has_one_name_across_tools(daemon_client):
    async with create_connected_server_and_client_session(build_server(daemon_client)) as session:
        tools = (await session.list_tools()).tools
    assert {(t.name, arg) for t in tools for arg in t.inputSchema["properties"] if arg in BARE_IDS} == set()


async def test_an_unknown_argument_is_refused_naming_it(daemon_client):
    async with create_connected_server_and_client_session(build_server(daemon_client)) as session:
        result = await session.call_tool("svc_logs_spans", {"experimnt_id": "exp-1"})
    assert (result.isError, result.content[0].text.split(";")[0]) == (True, "svc_logs_spans: unknown argument 'experimnt_id'")
