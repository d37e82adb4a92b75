"""MCP `svc_logs_scores` (official MCP client) answers the rows `svc logs scores` shows: GET /v1/scores."""
from __future__ import annotations

import asyncio
import json

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from client.mcp_server import build_server
from tests.support.homes import short_dir
from tests.support.socket_client import socket_client
from tests.support.specs import spec_yaml


@pytest.fixture
async def client():
    with short_dir("svc-mcps-") as home:
        async with socket_client(home) as api:
            yield api


async def test_svc_logs_scores_answers_the_latest_rows_of_the_rule(client):
    await client.post("/v1/specs", {"name": "demo", "yaml": spec_yaml("demo")})
    experiment = await client.post("/v1/experiments", {"spec_id": "demo"})
    await client.post("/v1/traces", {"events": [{"event_type": "llm_call", "experiment_id": experiment["id"], "output": text}
                                                for text in ("42", "no", "42 again")]})
    rule = await client.post("/v1/score-rules", {"name": "says 42", "type": "regex", "pattern": "42"})
    for _ in range(2):  # a re-score appends rows; the tool shows the latest per span
        job = await client.post(f"/v1/experiments/{experiment['id']}/score", {"rule_ids": [rule["id"]]})
        while (await client.get(f"/v1/score-jobs/{job['job_id']}"))["status"] != "completed":
            await asyncio.sleep(0.02)
    async with create_connected_server_and_client_session(build_server(client)) as session:
        result = await session.call_tool("svc_logs_scores", {"experiment_id": experiment["id"], "rule_id": rule["id"]})
    answer = json.loads(result.content[0].text)
    listing = await client.get("/v1/scores", params={"experiment_id": experiment["id"], "rule_id": rule["id"]})
    assert (answer["count"], answer["items"]) == (3, listing["items"])
