"""What the regression gate fixes before it sees any outcome, shared by the daemon's gate
(daemon/experiments/gate.py) and the client's sequential rounds (client/gate_adaptive.py): a
scenario's identity and label across experiments, and the sequential rule of `--adaptive N` (how many
rounds and looks, each look's level, which (scenario, side) gets the next replica). Standard library only."""
from __future__ import annotations

import json
from typing import Any, Sequence


def scenario_key(scenario: dict[str, Any]) -> str:
    """A scenario's identity across experiments: its matrix entry (a dataset scenario's names its record)."""
    return json.dumps(scenario.get("matrix_entry") or {}, sort_keys=True, separators=(",", ":"))


def _label_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def scenario_label(entry: dict[str, Any] | None) -> str:
    """A scenario's name as the reports show it: its matrix entry as key=value[,key=value...]."""
    return ",".join(f"{k}={_label_value(v)}" for k, v in (entry or {}).items()) or "(no matrix)"


SEQUENTIAL_ROUNDS = 4


def sequential_rounds(runs: int, rounds: int = SEQUENTIAL_ROUNDS) -> list[int]:
    """The runs of each round of `--adaptive runs`: split as evenly as can be over at most `rounds`
    rounds (the first ones take the remainder), none empty."""
    count = min(rounds, max(0, runs))
    if count == 0:
        return []
    each, extra = divmod(runs, count)
    return [each + (1 if i < extra else 0) for i in range(count)]


def sequential_looks(runs: int, rounds: int = SEQUENTIAL_ROUNDS) -> int:
    """Looks of `--adaptive runs`: the one before any replica is added and one after each round."""
    return 1 + len(sequential_rounds(runs, rounds))


def sequential_level(level: float, runs: int, rounds: int = SEQUENTIAL_ROUNDS) -> float:
    """The level each look tests at: `level` split evenly over the looks (Bonferroni)."""
    return level / sequential_looks(runs, rounds)


def round_slots(keys: Sequence[str], sides: Sequence[str], start: int, runs: int) -> list[tuple[str, str]]:
    """The next `runs` (scenario key, side) slots of the fixed cycle scenario by scenario, each
    scenario's sides in turn, from position `start` (the runs already added)."""
    cycle = [(key, side) for key in keys for side in sides]
    return [cycle[(start + i) % len(cycle)] for i in range(runs)] if cycle else []
