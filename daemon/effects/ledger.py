"""One run's ledger from its trajectory blob (daemon/runner/phases.py `record`): the audit events
of the agent's window (`agent_audit_window`, indexes into `audit_events`; the whole list for runs
recorded before it was kept), the trace's `llm_call` events, and the workspace and container
changes around the agent."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from daemon.contract.effects import (
    DbEffect,
    EffectSources,
    FileEffect,
    HttpEffect,
    ModelEffect,
    ProcessEffect,
    RunEffects,
)

FILE_CHANGE = {"create": "added", "modify": "modified", "delete": "deleted"}


def agent_events(trajectory: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """(the audit events of the agent's window, True) or (all of them, False) when the window is unknown."""
    events = [e for e in trajectory.get("audit_events") or [] if isinstance(e, dict)]
    window = trajectory.get("agent_audit_window")
    if isinstance(window, list) and len(window) == 2 and all(isinstance(i, int) for i in window):
        return events[window[0]:window[1]], True
    return events, False


KEYS_SHOWN = 20  # primary-key values per table and operation


def add_keys(item: dict[str, Any], d: dict[str, Any]) -> None:
    """The `db_write` event's keys (daemon/sandbox/db_audit.py) into a ledger item: distinct, in commit
    order, at most KEYS_SHOWN; `keys_more` when rows went unlisted."""
    columns = d.get("key_columns")
    if not isinstance(columns, list) or not columns:
        item["unkeyed"] = True  # a write without keys (TRUNCATE, a table without a primary key then)
        return
    item["key_columns"] = item["key_columns"] or [str(c) for c in columns]
    keys = item["keys"]
    for k in d.get("keys") or []:
        if str(k) in keys:
            continue
        if len(keys) >= KEYS_SHOWN:
            item["keys_more"] = True
            break
        keys.append(str(k))
    item["keys_more"] = item["keys_more"] or bool(d.get("keys_more"))


def db_effects(events: Iterable[dict[str, Any]]) -> list[DbEffect]:
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for event in events:
        if event.get("type") != "db_write":
            continue
        d = event.get("details") or {}
        key = (str(d.get("service") or "?"), str(d.get("table") or "?"), str(d.get("operation") or "?"))
        item = grouped.setdefault(key, {"rows": 0, "transactions": 0, "commands": [], "key_columns": [], "keys": [],
                                        "keys_more": False, "unkeyed": False})
        add_keys(item, d)
        item["transactions"] += 1
        if isinstance(d.get("row_count"), int) and item["rows"] is not None:
            item["rows"] += d["row_count"]
        else:
            item["rows"] = None
        if key[2] == "ddl" and d.get("command"):
            item["commands"].append(str(d["command"]))
    out = []
    for (s, t, o), v in sorted(grouped.items()):
        unkeyed = v.pop("unkeyed")
        v["keys_more"] = v["keys_more"] or bool(unkeyed and v["key_columns"])
        out.append(DbEffect(service=s, table=t, operation=o, **v))
    return out


def http_effects(events: Iterable[dict[str, Any]]) -> list[HttpEffect]:
    grouped: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for event in events:
        if event.get("type") != "http_call":
            continue
        d = event.get("details") or {}
        key = (str(d.get("host") or "?"), str(d.get("method") or "?").upper(), str(d.get("path") or "/").split("?", 1)[0])
        status = "blocked" if d.get("blocked") else str(d.get("status"))
        grouped[key][status] = grouped[key].get(status, 0) + 1
    return [HttpEffect(host=h, method=m, path=p, calls=sum(st.values()), statuses=dict(sorted(st.items())))
            for (h, m, p), st in sorted(grouped.items())]


def model_effects(trace_events: Iterable[dict[str, Any]]) -> list[ModelEffect]:
    grouped: dict[str, dict[str, Any]] = {}
    for event in trace_events:
        if not isinstance(event, dict) or event.get("event_type") != "llm_call":
            continue
        raw = event.get("cost")
        cost: dict[str, Any] = raw if isinstance(raw, dict) else {}
        model = str(cost.get("model") or (event.get("metadata") or {}).get("model") or "unknown")
        item = grouped.setdefault(model, {"calls": 0, "errors": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": None})
        item["calls"] += 1
        item["errors"] += event.get("status") == "error"
        item["input_tokens"] += int(cost.get("input_tokens") or 0)
        item["output_tokens"] += int(cost.get("output_tokens") or 0)
        usd = event.get("cost_usd", cost.get("estimated_usd"))
        if isinstance(usd, (int, float)):
            item["cost_usd"] = round((item["cost_usd"] or 0.0) + usd, 6)
    return [ModelEffect(model=m, **v) for m, v in sorted(grouped.items())]


def file_effects(changes: list[dict[str, Any]] | None, where: str) -> list[FileEffect]:
    out = []
    for change in changes or []:
        if isinstance(change, dict) and change.get("change") in ("added", "modified", "deleted"):
            out.append(FileEffect(path=str(change.get("path")), change=change["change"], where=where))  # type: ignore[arg-type]
    return out


def watched_files(events: Iterable[dict[str, Any]]) -> list[FileEffect]:
    """The workspace's net changes from the file watcher's `file_write` events (when no diff was kept):
    created then deleted is nothing, created then modified is added."""
    state: dict[str, str] = {}
    for event in events:
        if event.get("type") != "file_write":
            continue
        d = event.get("details") or {}
        change, path = FILE_CHANGE.get(str(d.get("operation"))), str(d.get("path") or "")
        if change is None or not path or d.get("is_dir"):
            continue
        before = state.get(path)
        if before == "added" and change == "deleted":
            state.pop(path)
        elif before == "added":
            continue
        elif before == "deleted" and change != "deleted":
            state[path] = "modified"
        else:
            state[path] = change
    return [FileEffect(path=p, change=c, where="workspace") for p, c in sorted(state.items())]  # type: ignore[arg-type]


def process_effects(events: Iterable[dict[str, Any]]) -> list[ProcessEffect]:
    grouped: dict[str, list[int | None]] = defaultdict(list)
    for event in events:
        if event.get("type") != "process_spawn":
            continue
        d = event.get("details") or {}
        code = d.get("exit_code")
        grouped[str(d.get("command") or "?")].append(code if isinstance(code, int) else None)
    return [ProcessEffect(command=c, count=len(codes), exit_codes=codes) for c, codes in sorted(grouped.items())]


def build(trajectory: dict[str, Any], row: dict[str, Any], shown: set[str]) -> RunEffects:
    """The ledger of the run `row` (id, spec_id, spec_version, experiment_id, scenario_id, status)
    from its `trajectory`; `shown`: the audit event types the spec's `audit` switches keep in it."""
    events, in_window = agent_events(trajectory)
    workspace = trajectory.get("workspace_changes")
    container = trajectory.get("container_changes")
    watched = "file_write" in shown
    files = file_effects(workspace, "workspace") if workspace is not None else watched_files(events) if watched else []
    files += file_effects(container, "container")
    notes = []
    if not in_window:
        notes.append("this run was recorded before the agent's window was kept: the ledger holds the whole sandbox's "
                     "events, setup and checks included")
    return RunEffects(
        run_id=row["id"], spec_id=row["spec_id"], spec_version=row["spec_version"], experiment_id=row.get("experiment_id"),
        scenario_id=row.get("scenario_id"), status=row["status"], window="agent" if in_window else "run",
        sources=EffectSources(db="db_write" in shown, http="http_call" in shown, models=True,
                              workspace_files=workspace is not None or watched, container_files=container is not None,
                              processes="process_spawn" in shown),
        db=db_effects(events), http=http_effects(events), models=model_effects(trajectory.get("trace_events") or []),
        files=sorted(files, key=lambda f: (f.where, f.path)), processes=process_effects(events), notes=notes,
    )
