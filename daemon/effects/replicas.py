"""The effects of one scenario's runs in two experiments (`svc eval compare`): an effect every run of
one side has at one value and every run of the other at another (or not at all) is a difference
between the experiments; an effect whose value differs between the replicas of one side is named
as such (the cause of a flaky verdict is often there)."""
from __future__ import annotations

from typing import Any, Literal

from daemon.contract.effects import RunEffects, ScenarioEffectDifference
from daemon.effects.diff import compared_kinds, keys_of, kind_of, message, quantities

Side = Literal["baseline", "candidate"]
SIDES: tuple[Side, Side] = ("baseline", "candidate")


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)


def key_differences(kind: str, key: str, baseline: list[Any], candidate: list[Any],
                    keys: tuple[str | None, str | None] = (None, None)) -> list[ScenarioEffectDifference]:
    """One effect's values in each baseline and candidate run -> what differs; `keys`: the keys of
    the rows a db effect changed in the first run of each side that has it."""
    values = {"baseline": baseline, "candidate": candidate}
    what = f"{key.split(' ', 1)[1]} ({kind})"

    def item(side: Literal["between", "baseline", "candidate"], text: str) -> ScenarioEffectDifference:
        return ScenarioEffectDifference(kind=kind_of(kind), key=key, side=side, baseline=baseline, candidate=candidate,
                                        message=text)

    stable = {side: len(set(values[side])) == 1 for side in SIDES}
    everywhere = {side: all(v is not None for v in values[side]) for side in SIDES}
    nowhere = {side: all(v is None for v in values[side]) for side in SIDES}
    out = []
    if stable["baseline"] and stable["candidate"]:
        if baseline[0] != candidate[0]:
            out.append(item("between", message(kind, key, baseline[0], candidate[0], SIDES, keys)))
    else:
        for present, other in (SIDES, SIDES[::-1]):
            if everywhere[present] and nowhere[other]:
                out.append(item("between", f"{what}: in every {present} run ({', '.join(map(_shown, values[present]))}), "
                                           f"in no {other} run"))
    for side in SIDES:
        if not stable[side]:
            out.append(item(side, f"the {side}'s {len(values[side])} replicas differ on {what}: "
                                  f"{', '.join(map(_shown, values[side]))}"))
    return out


def scenario_differences(baseline: list[RunEffects], candidate: list[RunEffects]) -> list[ScenarioEffectDifference]:
    if not baseline or not candidate:
        return []
    known, _ = compared_kinds(*baseline, *candidate)
    qb, qc = [quantities(x) for x in baseline], [quantities(x) for x in candidate]
    kb, kc = [keys_of(x) for x in baseline], [keys_of(x) for x in candidate]
    out = []
    for kind, key in sorted({k for q in qb + qc for k in q if k[0] in known}):
        keys = (next((k[(kind, key)] for k in kb if (kind, key) in k), None),
                next((k[(kind, key)] for k in kc if (kind, key) in k), None))
        out += key_differences(kind, key, [q.get((kind, key)) for q in qb], [q.get((kind, key)) for q in qc], keys)
    return out
