"""The agent's tools: read-only views of the asking tenant's own data (daemon/store/investigate.py).

Each tool takes JSON arguments and answers JSON text bounded to TOOL_RESULT_CHARS. An id of
another tenant answers exactly like an id that does not exist.
"""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from daemon.experiments.compare import compare_summaries
from daemon.store import investigate as views
from daemon.store.db import Store

TOOL_RESULT_CHARS = 6000
MAX_ID_CHARS = 200
MAX_ROWS = 50


class ToolInputError(ValueError):
    pass


def _id(args: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise ToolInputError(f"{name}: expected an id of 1 to {MAX_ID_CHARS} characters")
    return value


def _limit(args: dict[str, Any], default: int = 20) -> int:
    value = args.get("limit", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_ROWS:
        raise ToolInputError(f"limit: expected an integer from 1 to {MAX_ROWS}")
    return value


def _missing(kind: str, ident: str) -> dict[str, Any]:
    return {"error": f"{kind} '{ident}' not found"}


def _invariant_evidence(result: Any) -> Any:
    """The parts of a run result an investigation reads: failing invariants first, with evidence."""
    if not isinstance(result, dict):
        return result
    invariants = result.get("invariant_results") or []
    failing = [i for i in invariants if isinstance(i, dict) and i.get("status") not in ("passed", "pass")]
    return {"invariant_results": failing or invariants, "violations": result.get("violations"),
            "error": result.get("error"), "reproducer": result.get("reproducer")}


async def list_experiments(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    status = args.get("status")
    if status is not None and (not isinstance(status, str) or len(status) > 40):
        raise ToolInputError("status: expected created, running, completed, failed or cancelled")
    return {"experiments": await views.experiments(store, tenant_id, _limit(args), status)}


async def get_experiment(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    experiment_id = _id(args, "experiment_id")
    experiment = await views.experiment(store, tenant_id, experiment_id)  # type: ignore[arg-type]
    if experiment is None:
        return _missing("experiment", experiment_id)  # type: ignore[arg-type]
    experiment["scenarios"] = await views.scenarios(store, tenant_id, experiment_id, MAX_ROWS)  # type: ignore[arg-type]
    return experiment


async def failing_scenarios(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    experiment_id = _id(args, "experiment_id")
    if await views.experiment(store, tenant_id, experiment_id) is None:  # type: ignore[arg-type]
        return _missing("experiment", experiment_id)  # type: ignore[arg-type]
    failing = await views.scenarios(store, tenant_id, experiment_id, _limit(args, 10), failing_only=True)  # type: ignore[arg-type]
    for scenario in failing:
        runs = await views.runs(store, tenant_id, 3, scenario_id=scenario["id"], failing_only=True)
        scenario["failing_runs"] = runs
    return {"experiment_id": experiment_id, "failing_scenarios": failing}


async def get_run(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    run_id = _id(args, "run_id")
    run = await views.run(store, tenant_id, run_id)  # type: ignore[arg-type]
    if run is None:
        return _missing("run", run_id)  # type: ignore[arg-type]
    run["result"] = _invariant_evidence(run["result"])
    return run


async def get_reproducer(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    run_id = _id(args, "run_id")
    run = await views.run(store, tenant_id, run_id)  # type: ignore[arg-type]
    if run is None:
        return _missing("run", run_id)  # type: ignore[arg-type]
    result = run["result"] if isinstance(run["result"], dict) else {}
    return {"run_id": run_id, "reproducer": result.get("reproducer")}


async def find_spans(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    found = await views.spans(store, tenant_id, _limit(args), trace_id=_id(args, "trace_id", False),
                              experiment_id=_id(args, "experiment_id", False), run_id=_id(args, "run_id", False),
                              errors_only=bool(args.get("errors_only")))
    return {"spans": found}


async def compare_experiments(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    baseline_id, candidate_id = _id(args, "baseline_id"), _id(args, "candidate_id")
    baseline = await views.experiment(store, tenant_id, baseline_id)  # type: ignore[arg-type]
    candidate = await views.experiment(store, tenant_id, candidate_id)  # type: ignore[arg-type]
    if baseline is None or candidate is None:
        return _missing("experiment", baseline_id if baseline is None else candidate_id)  # type: ignore[arg-type]
    if not isinstance(baseline["summary"], dict) or not isinstance(candidate["summary"], dict):
        return {"error": "both experiments must have finished (no metrics summary yet)"}
    return {"baseline_id": baseline_id, "candidate_id": candidate_id,
            **compare_summaries(baseline["summary"], candidate["summary"])}


async def get_scores(store: Store, tenant_id: str, args: dict[str, Any]) -> Any:
    experiment_id = _id(args, "experiment_id")
    if await views.experiment(store, tenant_id, experiment_id) is None:  # type: ignore[arg-type]
        return _missing("experiment", experiment_id)  # type: ignore[arg-type]
    rows = await views.scores(store, tenant_id, experiment_id, _limit(args))  # type: ignore[arg-type]
    return {"error": "this daemon keeps no scores"} if rows is None else {"experiment_id": experiment_id, "scores": rows}


Tool = Callable[[Store, str, dict[str, Any]], Awaitable[Any]]
_ID = {"type": "string", "maxLength": MAX_ID_CHARS}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_ROWS}
# name: (function, description, parameters, required)
TOOLS: dict[str, tuple[Tool, str, dict[str, Any], list[str]]] = {
    "list_experiments": (list_experiments, "Recent experiments, newest first, with their metrics summary.",
                         {"status": {"type": "string"}, "limit": _LIMIT}, []),
    "get_experiment": (get_experiment, "One experiment with its metrics summary and its scenarios' verdicts.",
                       {"experiment_id": _ID}, ["experiment_id"]),
    "failing_scenarios": (failing_scenarios, "The failing scenarios of an experiment with their failing runs.",
                          {"experiment_id": _ID, "limit": _LIMIT}, ["experiment_id"]),
    "get_run": (get_run, "One run: verdict, reason, failing invariant results with their evidence, violations, reproducer.",
                {"run_id": _ID}, ["run_id"]),
    "get_reproducer": (get_reproducer, "The command that reproduces a run.", {"run_id": _ID}, ["run_id"]),
    "find_spans": (find_spans, "Trace spans (model calls, tool calls) by trace, experiment or run, newest first.",
                   {"trace_id": _ID, "experiment_id": _ID, "run_id": _ID, "errors_only": {"type": "boolean"}, "limit": _LIMIT}, []),
    "compare_experiments": (compare_experiments, "Compare two finished experiments' metrics (regressions flagged).",
                            {"baseline_id": _ID, "candidate_id": _ID}, ["baseline_id", "candidate_id"]),
    "get_scores": (get_scores, "Score-rule results of an experiment's spans.", {"experiment_id": _ID, "limit": _LIMIT},
                   ["experiment_id"]),
}


def specs() -> list[dict[str, Any]]:
    """The tools in OpenAI's `tools` shape."""
    return [{"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}
        for name, (_, description, properties, required) in TOOLS.items()]


def clip(text: str, limit: int = TOOL_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [truncated at {limit} characters]"


async def run_tool(store: Store, tenant_id: str, name: str, raw_arguments: Any) -> str:
    """The tool's answer as JSON text; a bad call answers an error the model can correct."""
    entry = TOOLS.get(name)
    if entry is None:
        return json.dumps({"error": f"unknown tool {name[:80]!r}; tools: {', '.join(TOOLS)}"})
    try:
        args = json.loads(raw_arguments) if isinstance(raw_arguments, str) and raw_arguments.strip() else (raw_arguments or {})
        if not isinstance(args, dict):
            raise ToolInputError("arguments must be a JSON object")
        result = await entry[0](store, tenant_id, args)
    except (ToolInputError, ValueError) as exc:
        result = {"error": str(exc)[:300]}
    return clip(json.dumps(result, default=str, separators=(",", ":")))
