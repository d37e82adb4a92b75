"""``http_mock_assertions {service, assertions: [{method, path, count | min_count | max_count,
body_contains?}]}`` over the requests a recording ``http_mock`` service received. ``path`` matches
the request path without its query string, exactly or as a glob (``/users/*``)."""
from __future__ import annotations

import fnmatch
import json
from typing import Any

from daemon.bounded import WorkTimeout, run_bounded
from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome

SAMPLE = 20


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, (dict, list)):
        return json.dumps(body)
    return str(body)


def matches(request: dict[str, Any], assertion) -> bool:
    method = str(request.get("method", "")).upper()
    if assertion.method not in ("*", method):
        return False
    path = str(request.get("path", "")).split("?", 1)[0]
    if path != assertion.path and not ("*" in assertion.path and fnmatch.fnmatchcase(path, assertion.path)):
        return False
    if assertion.body_contains is not None and assertion.body_contains not in _body_text(request.get("body")):
        return False
    return True


def assess(assertion, requests: list[dict[str, Any]]) -> dict[str, Any]:
    seen = sum(1 for r in requests if matches(r, assertion))
    ok = True
    expected: dict[str, int] = {}
    if assertion.count is not None:
        expected["count"] = assertion.count
        ok = seen == assertion.count
    if assertion.min_count is not None:
        expected["min_count"] = assertion.min_count
        ok = ok and seen >= assertion.min_count
    if assertion.max_count is not None:
        expected["max_count"] = assertion.max_count
        ok = ok and seen <= assertion.max_count
    body = {"method": assertion.method, "path": assertion.path, "seen": seen, **expected, "passed": ok}
    if assertion.body_contains is not None:
        body["body_contains"] = assertion.body_contains
    return body


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    requests = await ctx.sandbox.mock_requests(check.service)
    try:  # the agent decides how many requests (and bodies) there are to match
        results = await run_bounded(lambda: [assess(a, requests) for a in check.assertions], what="matching the mock's requests")
    except WorkTimeout as exc:
        return outcome("failed", {"service": check.service, "request_count": len(requests), **exc.evidence()})
    passed = all(r["passed"] for r in results)
    evidence = {
        "service": check.service,
        "assertions": results,
        "request_count": len(requests),
        "requests": [
            {"method": r.get("method"), "path": r.get("path"), "body": ctx.tail(_body_text(r.get("body")), 300)}
            for r in requests[:SAMPLE]
        ],
    }
    return outcome("passed" if passed else "failed", evidence)
