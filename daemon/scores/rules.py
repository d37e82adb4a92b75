"""Score rule validation (400 naming the field) and the spec's `score_rules:` kept in the store."""
from __future__ import annotations

import logging
from typing import Any

import regex

from daemon.bounded import WorkTimeout, compile_pattern, run_bounded
from daemon.errors import InvalidRequest
from daemon.store import judges as judge_store
from daemon.store import scores as score_store
from daemon.util import new_id, now_iso
from daemon.appkeys import STORE

# The field each type needs, and the fields only some types take.
REQUIRED = {"llm_judge": "rubric", "regex": "pattern", "python": "command"}
ALLOWED = {"llm_judge": {"rubric", "judge_id", "model"}, "regex": {"pattern"}, "python": {"command"}}
TYPED_FIELDS = ("rubric", "pattern", "command", "judge_id", "model")
log = logging.getLogger("svcd.scores")
COMPILE_LIMIT_S = 2.0
MAX_SPEC_RULES = 100


def _bad(loc: str, msg: str) -> InvalidRequest:
    return InvalidRequest(f"{loc}: {msg}", [{"loc": loc, "msg": msg}])


async def check_pattern(pattern: str, loc: str = "pattern") -> None:
    """The pattern compiles with the `regex` engine the scoring uses, within a time limit."""
    try:
        await run_bounded(compile_pattern, pattern, what="compiling the pattern", limit_s=COMPILE_LIMIT_S)
    except (regex.error, OverflowError, RecursionError, ValueError) as exc:
        raise _bad(loc, f"invalid regular expression: {exc}")
    except WorkTimeout:
        raise _bad(loc, f"the regular expression did not compile within {COMPILE_LIMIT_S:g}s")


async def validate(store: Any, tenant_id: str, fields: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`fields` (ScoreRuleCreate as a dict) checked against its type; 400 naming `prefix + field`."""
    kind = fields["type"]
    for name in TYPED_FIELDS:
        if fields.get(name) is not None and name not in ALLOWED[kind]:
            raise _bad(prefix + name, f"not used by a {kind} rule (it takes {', '.join(sorted(ALLOWED[kind]))})")
    needed = REQUIRED[kind]
    if fields.get(needed) is None and not (kind == "llm_judge" and fields.get("judge_id")):
        extra = " or judge_id" if kind == "llm_judge" else ""
        raise _bad(prefix + needed, f"required for a {kind} rule{extra}")
    if kind == "regex":
        await check_pattern(fields["pattern"], prefix + "pattern")
    if fields.get("judge_id"):
        judge = await judge_store.get(store, fields["judge_id"])
        if judge is None or judge["tenant_id"] != tenant_id:
            raise _bad(prefix + "judge_id", f"no judge '{fields['judge_id']}'")
    return fields


def _declared_fields(document: Any) -> list[dict[str, Any]]:
    """The spec's `score_rules:` as request-shaped fields scoped to its id (first of each name)."""
    seen: set[str] = set()
    declared = []
    for rule in getattr(document, "score_rules", None) or []:
        if rule.name in seen:
            continue
        seen.add(rule.name)
        fields = rule.model_dump(mode="json", exclude_none=True)
        fields["eval_id"] = document.id
        fields["applies_to"] = {k: v for k, v in (fields.get("applies_to") or {}).items() if v is not None}
        declared.append(fields)
    return declared


async def check_spec_rules(app: Any, tenant_id: str, document: Any) -> None:
    """SPEC_CHECK_HOOKS: refuse the upload (400 naming `score_rules.N.field`) when a declared rule
    is invalid or there are too many, before anything is stored."""
    declared = list(getattr(document, "score_rules", None) or [])
    if len(declared) > MAX_SPEC_RULES:
        raise _bad("score_rules", f"a spec declares at most {MAX_SPEC_RULES} score rules, this one {len(declared)}")
    for index, rule in enumerate(declared):
        fields = rule.model_dump(mode="json", exclude_none=True)
        await validate(app[STORE], tenant_id, fields, prefix=f"score_rules.{index}.")


async def save_spec_rules(app: Any, tenant_id: str, document: Any) -> None:
    """SPEC_SAVED_HOOKS: the spec's `score_rules:` become rules scoped to its id: same name, same
    rule (updated); a name no longer declared is deleted. check_spec_rules has validated them."""
    store = app[STORE]
    existing = {row["name"]: row for row in await score_store.spec_rules(store, tenant_id, document.id)}
    now = now_iso()
    declared = _declared_fields(document)
    for fields in declared:
        row = existing.get(fields["name"])
        if row is None:
            await score_store.insert_rule(store, new_id("sr_"), tenant_id, fields, "spec", now)
        else:
            await score_store.update_rule(store, row["id"], fields, now)
    kept = {fields["name"] for fields in declared}
    for name, row in existing.items():
        if name not in kept:
            await score_store.delete_rule(store, row["id"])
