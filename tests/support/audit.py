"""A sandbox's audit log (the daemon-side copy, `<workspace>/.svc/audit.jsonl`) as tests read it."""
from __future__ import annotations

import json
from typing import Any, Callable

from tests.support.waiting import eventually


def audit_events(api, sandbox_id: str, type_: str | None = None) -> list[dict[str, Any]]:
    """Every audit event of the sandbox so far (of `type_` when given)."""
    path = api.manager.workspace_path(sandbox_id) / ".svc" / "audit.jsonl"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    events = [json.loads(line) for line in lines if line.strip()]
    return [e for e in events if type_ is None or e["type"] == type_]


async def wait_audit(api, sandbox_id: str, type_: str, pred: Callable[[dict], Any] = lambda _d: True, n: int = 1,
                     timeout: float = 10) -> list[dict[str, Any]]:
    """The `type_` events whose details match `pred`, once there are `n` of them (or what there is
    when `timeout` passes: the caller asserts on it)."""
    async def matching() -> list[dict[str, Any]]:
        return [e for e in audit_events(api, sandbox_id, type_) if pred(e["details"])]

    got = await eventually(lambda: _enough(matching, n), timeout=timeout, interval=0.1)
    return got if got else await matching()


async def _enough(matching, n: int):
    got = await matching()
    return got if len(got) >= n else None
