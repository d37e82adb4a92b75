"""`svc logs traces|trace|spans` against the in-process daemon."""
from __future__ import annotations

import json

import pytest

from client.api import ApiError, Client
from client.cli import build_parser
from client.config import ClientConfig
from tests.support.store import add_experiment


async def run_cli(api, tmp_path, *argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    config = ClientConfig(base_url=str(api.client.make_url("")).rstrip("/"), api_key=api.key, timeout=30, home=tmp_path,
                          api_key_source="flag")
    async with Client(config) as client:
        return await args.func(args, client)


@pytest.fixture
async def seeded(api):
    for experiment_id in ("exp-cli", "exp-other"):
        await add_experiment(api, experiment_id)
    events = [{"event_type": "span", "phase": "start", "span_id": "span_cli_root", "tool": "agent", "experiment_id": "exp-cli"}]
    for i in range(250):
        events.append({"event_type": "tool_call" if i % 2 else "llm_call", "tool": "search" if i % 2 else "chat",
                       "parent_span_id": "span_cli_root", "experiment_id": "exp-cli", "agent": "bot", "input": str(i),
                       "ts": f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}Z"})
    events.append({"event_type": "tool_call", "tool": "search", "experiment_id": "exp-other"})
    response, body = await api.post("/v1/traces", json={"events": events})
    assert response.status == 202 and body["rejected"] == 0
    return body["trace_ids"]


async def test_logs_traces_streams_ndjson_across_pages(api, tmp_path, seeded, capsys):
    assert await run_cli(api, tmp_path, "logs", "traces", "exp-cli", "--page-size", "7") == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 251
    events = [json.loads(line) for line in lines]
    assert {e["experiment_id"] for e in events} == {"exp-cli"} and len({e["id"] for e in events}) == 251
    assert await run_cli(api, tmp_path, "logs", "traces", "exp-cli", "--event-type", "tool_call", "--tool", "search",
                         "--agent", "bot", "--since", "2025-01-01T00:02:00Z") == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events and all(e["tool"] == "search" and e["ts"] >= "2025-01-01T00:02:00" for e in events)
    assert len(events) == len([i for i in range(120, 250) if i % 2])


async def test_logs_traces_json_format_to_a_file(api, tmp_path, seeded, capsys):
    out = tmp_path / "events.json"
    assert await run_cli(api, tmp_path, "logs", "traces", "exp-cli", "--format", "json", "-o", str(out), "--page-size", "100") == 0
    data = json.loads(out.read_text())
    assert isinstance(data, list) and len(data) == 251
    assert "wrote 251 items" in capsys.readouterr().err
    assert await run_cli(api, tmp_path, "logs", "traces", "exp-none", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == []


async def test_logs_trace_and_spans(api, tmp_path, seeded, capsys):
    (trace_id,) = seeded[:1]
    assert await run_cli(api, tmp_path, "logs", "trace", trace_id) == 0
    detail = json.loads(capsys.readouterr().out)
    assert detail["trace_id"] == trace_id and detail["spans"][0]["span_id"] == "span_cli_root" and detail["span_count"] == 251
    assert await run_cli(api, tmp_path, "logs", "spans", "--trace", trace_id, "--parent-span", "span_cli_root",
                         "--event-type", "llm_call", "--page-size", "50") == 0
    spans = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(spans) == 125 and {s["tool"] for s in spans} == {"chat"}
    assert await run_cli(api, tmp_path, "logs", "spans", "--root-span", "span_cli_root", "--tool", "search", "--format", "json") == 0
    assert len(json.loads(capsys.readouterr().out)) == 125
    assert await run_cli(api, tmp_path, "logs", "spans", "--span", "span_cli_root", "--experiment", "exp-cli") == 0
    (root,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert root["open"] is True


async def test_logs_errors(api, tmp_path, seeded):
    with pytest.raises(ApiError) as err:
        await run_cli(api, tmp_path, "logs", "trace", "trace-nope")
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        await run_cli(api, tmp_path, "logs", "traces", "--since", "last tuesday")
    assert err.value.status == 400 and err.value.details["errors"][0]["loc"] == "query.since"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["logs", "traces", "--page-size", "0"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["logs", "spans", "--event-type", "thinking"])
