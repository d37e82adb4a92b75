"""``file_content {path, contains | regex | equals}``: the file contains a substring, matches a
regular expression (``regex.search``, multiline, re-compatible syntax) or equals a text exactly.

The file is the agent's: decoding and matching run off the event loop with a time limit
(daemon.bounded); a regex that runs out of time fails the check with evidence ``{timeout: true}``."""
from __future__ import annotations

from daemon.bounded import WorkTimeout, regex_search, run_bounded
from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome

READ_LIMIT = 10 * 1024 * 1024


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    data = await ctx.read_file(check.path, READ_LIMIT)
    if data is None:
        return outcome("failed", {"path": check.path, "exists": False})
    evidence: dict = {"path": check.path, "exists": True, "size": len(data)}
    try:
        text = await run_bounded(_decode, data, what="reading the file")
        if check.contains is not None:
            ok = check.contains in text
            evidence["contains"] = check.contains
        elif check.regex is not None:
            evidence["regex"] = check.regex
            match = await regex_search(check.regex, text, what=f"regex {check.regex!r} on {check.path}")
            ok = match is not None
            if match:
                evidence["match"] = ctx.redact(match.group(0)[:500])
        else:
            ok = text == check.equals
            evidence["equals"] = check.equals
    except WorkTimeout as exc:
        return outcome("failed", {**evidence, **exc.evidence()})
    if not ok:
        evidence["content"] = ctx.tail(text[:4000], 1000)
    return outcome("passed" if ok else "failed", evidence)
