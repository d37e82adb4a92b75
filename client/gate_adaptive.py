"""The sequential, budget-capped gate: `svc eval compare A B --gate --adaptive N [--max-cost USD]`
(and the MCP compare tool's `adaptive`/`max_cost`).

While the comparison is `inconclusive`, more replicas are added to the gated scenarios (paired, not
quarantined; deterministic ones included: a scenario that went 1/1 -> 0/1 is open too) of both
experiments, through ``POST /v1/experiments/{id}/extend`` with the scenarios named, and the two are
compared again. The rule (daemon/experiments/gate.py, docs/explanation/gate.md):

- at most SEQUENTIAL_ROUNDS rounds, N runs split evenly over them; ``1 + rounds`` looks, each at
  ``level / looks`` (Bonferroni-split alpha: the false-alarm rate over all the looks stays at most
  ``level``);
- a round's runs go round-robin over (scenario, side) slots in a fixed order that continues from
  round to round, so where replicas go never depends on an outcome;
- it stops at the first look whose word is not `inconclusive`, when N runs are spent, or when
  ``--max-cost`` would be passed (the next round is cut to what the runs' recorded mean cost per run
  leaves of the budget; without recorded costs the budget is only checked after each round).

A baseline given as a bundle (``--baseline FILE``) or imported from one is not extended (it did not
run here): the candidate alone gets the replicas. The experiments' declared secrets are resolved
again on this machine, from the spec version the daemon holds (``file:`` paths from the current
directory). The answer is the last comparison with an ``adaptive`` block: looks, the level per look,
runs added per side, dollars spent and why it stopped.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping

from client.api import Client
from client.routes import R

SIDES = ("candidate", "baseline")


def _cost(results: dict[str, Any]) -> float:
    value = (results.get("metrics") or {}).get("total_cost_usd")
    return float(value) if isinstance(value, (int, float)) else 0.0


async def _secrets(client: Client, results: dict[str, Any], environ: Mapping[str, str] | None) -> dict[str, str] | None:
    """The experiment's declared secrets, resolved here again (the daemon forgot them when it finished)."""
    if not results.get("secret_names"):
        return None
    from client.local_spec import resolve_secrets
    from daemon.spec import load_spec

    spec = await client.call(R.GET_SPEC, query={"version": results["spec_version"]}, spec_id=results["spec_id"])
    doc = load_spec(spec.get("yaml") or "", f"{results['spec_id']} v{results['spec_version']}")
    return resolve_secrets(doc.secrets, Path.cwd(), environ) or None


def gated_keys(candidate: dict[str, Any], baseline_scenarios: list[dict[str, Any]], held: list[str]) -> list[str]:
    """The scenario keys the gate tests, in the candidate's matrix order: paired, not quarantined."""
    from daemon.gate_design import scenario_key, scenario_label

    paired = {scenario_key(s) for s in baseline_scenarios}
    return [scenario_key(s) for s in candidate.get("scenarios") or []
            if scenario_key(s) in paired and scenario_label(s.get("matrix_entry")) not in held]


def _look(result: dict[str, Any], added: dict[str, int]) -> dict[str, Any]:
    rate: dict[str, Any] = next((m for m in result.get("metrics") or [] if m.get("name") == "pass_rate"), {})
    return {"decision": result.get("decision"), "p_value": rate.get("p_value"), "added": dict(added)}


async def adaptive_compare(client: Client, body: dict[str, Any], *, runs: int, max_cost: float | None = None,
                           level: float = 0.05, poll_s: float = 2.0, wait_timeout_s: float = 600.0,
                           on_look: Callable[[dict[str, Any]], Any] | None = None,
                           environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Compare, then add replicas round by round while the answer is inconclusive (module docstring);
    returns the last comparison with its ``adaptive`` block."""
    from client.eval_flow import wait_for_experiment
    from daemon.gate_design import round_slots, scenario_key, sequential_level, sequential_looks, sequential_rounds

    per_look = sequential_level(level, runs)
    body = {**body, "level": per_look}
    result = await client.call(R.COMPARE_EXPERIMENTS, body=body)
    current: dict[str, dict[str, Any]] = {"candidate": await client.call(R.GET_EXPERIMENT, experiment_id=body["candidate_id"])}
    if body.get("baseline_id"):
        current["baseline"] = await client.call(R.GET_EXPERIMENT, experiment_id=body["baseline_id"])
        baseline_scenarios = current["baseline"].get("scenarios") or []
        if current["baseline"].get("imported"):
            del current["baseline"]  # it ran elsewhere: its agent is not here to run again
    else:
        baseline_scenarios = ((body.get("baseline_bundle") or {}).get("experiment") or {}).get("scenarios") or []
    sides = [side for side in SIDES if side in current]
    keys = gated_keys(current["candidate"], baseline_scenarios, list(result.get("quarantined") or []))
    start_cost = {side: _cost(current[side]) for side in sides}
    secrets = {side: await _secrets(client, current[side], environ) for side in sides}
    added = {side: 0 for side in sides}
    looks = [_look(result, added)]
    if on_look:
        on_look(looks[-1])
    position, stopped = 0, "runs"
    for size in sequential_rounds(runs):
        spent = sum(_cost(current[side]) - start_cost[side] for side in sides)
        if result.get("decision") != "inconclusive":
            stopped = "decided"
            break
        if not keys:
            stopped = "nothing to add"
            break
        if max_cost is not None:
            finished = sum(current[side].get("completed_runs") or 0 for side in sides)
            per_run = sum(_cost(current[side]) for side in sides) / finished if finished else 0.0
            if per_run > 0:
                size = min(size, math.floor((max_cost - spent) / per_run + 1e-9))
            if spent >= max_cost or size <= 0:
                stopped = "cost"
                break
        slots = round_slots(keys, sides, position, size)
        position += size
        for side in sides:
            counts: dict[str, int] = {}
            for key, slot_side in slots:
                if slot_side == side:
                    counts[key] = counts.get(key, 0) + 1
            if not counts:
                continue
            ids = {scenario_key(s): s["id"] for s in current[side].get("scenarios") or []}
            extend_body: dict[str, Any] = {"runs": sum(counts.values()), "scenario_ids": [ids[key] for key in counts]}
            if secrets[side]:
                extend_body["secrets"] = secrets[side]
            answer = await client.call(R.EXTEND_EXPERIMENT, body=extend_body, experiment_id=current[side]["id"])
            added[side] += answer["added_runs"]
        for side in sides:
            current[side] = await wait_for_experiment(client, current[side]["id"], poll_s=poll_s, wait_timeout_s=wait_timeout_s)
        result = await client.call(R.COMPARE_EXPERIMENTS, body=body)
        looks.append(_look(result, added))
        if on_look:
            on_look(looks[-1])
    else:
        if result.get("decision") != "inconclusive":
            stopped = "decided"
        elif max_cost is not None and sum(_cost(current[side]) - start_cost[side] for side in sides) >= max_cost:
            stopped = "cost"
    cost = sum(_cost(current[side]) - start_cost[side] for side in sides)
    result["adaptive"] = {
        "rule": "Bonferroni-split alpha over a fixed maximum number of looks",
        "max_looks": sequential_looks(runs), "looks": len(looks), "level": level, "level_per_look": per_look,
        "max_runs": runs, "max_cost_usd": max_cost, "added_runs": sum(added.values()), "added_by_side": added,
        "cost_usd": round(cost, 6), "stopped": stopped, "history": looks,
    }
    return result


def adaptive_line(adaptive: dict[str, Any]) -> str:
    """One line: what the sequential gate spent and why it stopped."""
    why = {"decided": "the gate decided", "runs": "the runs were spent", "cost": "the cost budget was reached",
           "nothing to add": "no gated scenario to add replicas to"}[adaptive["stopped"]]
    sides = ", ".join(f"{n} {side}" for side, n in adaptive["added_by_side"].items())
    budget = f" of ${adaptive['max_cost_usd']:g}" if adaptive.get("max_cost_usd") is not None else ""
    return (f"svc: --adaptive: {adaptive['added_runs']} of {adaptive['max_runs']} runs added ({sides}), "
            f"${adaptive['cost_usd']:.4f}{budget} spent, {adaptive['looks']} of {adaptive['max_looks']} looks at "
            f"p <= {adaptive['level_per_look']:.4g} each (level {adaptive['level']:g} split over the looks): stopped because {why}")
