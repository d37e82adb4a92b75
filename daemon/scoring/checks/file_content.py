"""``file_content {path, contains | regex | equals}``: the file contains a substring, matches a
regular expression (``re.search``, multiline) or equals a text exactly."""
from __future__ import annotations

import re

from daemon.scoring.checks.context import CheckContext, outcome

READ_LIMIT = 10 * 1024 * 1024


async def evaluate(check, ctx: CheckContext) -> dict:
    data = await ctx.read_file(check.path, READ_LIMIT)
    if data is None:
        return outcome("failed", {"path": check.path, "exists": False})
    text = data.decode("utf-8", "replace")
    evidence: dict = {"path": check.path, "exists": True, "size": len(data)}
    if check.contains is not None:
        ok = check.contains in text
        evidence["contains"] = check.contains
    elif check.regex is not None:
        match = re.search(check.regex, text, re.MULTILINE)
        ok = match is not None
        evidence["regex"] = check.regex
        if match:
            evidence["match"] = ctx.redact(match.group(0)[:500])
    else:
        ok = text == check.equals
        evidence["equals"] = check.equals
    if not ok:
        evidence["content"] = ctx.tail(text[:4000], 1000)
    return outcome("passed" if ok else "failed", evidence)
