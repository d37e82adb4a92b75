"""Every `audit` switch is honoured (all off by default): with `process_spawns` off a command's
`process_spawn` is on neither the lifecycle stream (GET /v1/sandboxes/{id}/events) nor the
workspace copy /workspace/.svc/audit.jsonl (nor GET .../files/.svc/audit.jsonl), yet the daemon's
evidence (<SERVICE_HOME>/sandbox-evidence/<id>/audit.jsonl) keeps it for scoring; with the switch
on it is everywhere. (A forbidden rule reading process evidence with the switch off:
tests/docker/test_runs_forbidden.py::test_secret_printed_to_stdout.)"""
from __future__ import annotations

import json

import pytest

from tests.support.audit import audit_events
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

MARK = "echo audit-switch-marker"


def evidence(api, sandbox_id: str) -> list[dict]:
    path = api.manager.settings.home / "sandbox-evidence" / sandbox_id / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spawns(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("type") == "process_spawn" and MARK in e["details"]["command"]]


async def _sandbox_with(api, name: str, audit: dict | None) -> tuple[str, list[dict], list[dict], bytes, list[dict]]:
    doc = spec(name, **({"audit": audit} if audit is not None else {}))
    body = await api.create_from_spec(doc)
    assert body["state"] == "ready", body
    sid = body["id"]
    out = await api.run(sid, MARK)
    assert out["exit_code"] == 0 and "audit-switch-marker" in out["stdout"]
    copy = audit_events(api, sid)  # the host side of /workspace/.svc/audit.jsonl
    kept = evidence(api, sid)
    response = await api.client.get(f"/v1/sandboxes/{sid}/files/.svc/audit.jsonl", headers=api.headers())
    served = await response.read() if response.status == 200 else b""
    response, _ = await api.delete(f"/v1/sandboxes/{sid}")
    assert response.status in (200, 202, 204)
    stream = [e["data"] for e in await api.events(sid) if e.get("event_type") == "audit"]
    return sid, copy, kept, served, stream


async def test_process_spawns_off_keeps_them_in_the_evidence_only(api):
    sid, copy, kept, served, stream = await _sandbox_with(api, "switch-off", {"stdout_capture": True})
    assert len(spawns(kept)) == 1  # scoring still has it
    assert spawns(copy) == []
    assert spawns(stream) == []
    assert MARK not in served.decode()
    # the other default-off switches: nothing of theirs is shown either
    assert not [e for e in stream + copy if e["type"] in ("http_call", "db_write", "file_write")]


async def test_process_spawns_on_shows_them(api):
    sid, copy, kept, served, stream = await _sandbox_with(api, "switch-on", {"process_spawns": True})
    assert len(spawns(kept)) == 1
    assert len(spawns(copy)) == 1
    assert len(spawns(stream)) == 1
    assert MARK in served.decode()
