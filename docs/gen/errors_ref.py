"""The error code reference (docs/reference/errors.md), from the code: the API's error answers (every
subclass of daemon.errors.ApiError, with the status the OpenAPI document gives each code), the
`details.state` values a 409 names (Conflict(..., state) calls), the codes a run or scenario ends
with (`state.fail(step, message, code)` calls in daemon/) and the codes of a judge error
(daemon.contract.judges.JudgeErrorCode)."""
from __future__ import annotations

import ast
import inspect
import typing

import refcommon as common

SCRIPT = "errors_ref.py"

# What each API error code means to a client; the classes' own docstrings add the special cases.
WHEN = {
    "invalid_request": "The body, a query or path parameter or a header is invalid; `details.errors` lists each problem with its location.",
    "unauthorized": "No API key, or one the daemon does not know.",
    "forbidden": "The key is valid but may not do this (a sandbox token outside its own sandbox, an admin-only action).",
    "not_found": "No such resource for this tenant; `details.resource` and `details.id` name it.",
    "method_not_allowed": "The path exists, not with this method; `Allow` lists the methods it has.",
    "conflict": "The resource's state refuses the request; `details.state` names it (below).",
    "payload_too_large": "The body is over the limit in `details.limit_bytes`.",
    "unsupported_media_type": "The `Content-Type` is not one the route takes.",
    "rate_limited": "Too many requests for this key or tenant; retry after `Retry-After` seconds.",
    "internal_error": "A bug in the daemon; the `request_id` finds it in the daemon's log.",
    "at_capacity": "No room for another sandbox or job right now; retry after `Retry-After` seconds.",
}


def api_errors() -> list[tuple[int, str, str, str]]:
    """(status, code, class name, what it means) of every ApiError subclass."""
    import daemon.app  # noqa: F401  (imports every module that may define its own ApiError)
    from daemon.errors import ApiError

    seen: dict[tuple[int, str, str], str] = {}
    stack = [ApiError]
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        doc = " ".join((inspect.getdoc(cls) or "").split()) if cls.__doc__ else ""
        seen[(cls.status, cls.code, cls.__name__)] = doc
    return sorted((status, code, name, doc) for (status, code, name), doc in seen.items())


def _calls(predicate) -> dict[str, dict[str, set[str]]]:
    """{code: {"steps": {...}, "files": {...}}} over daemon/, for calls the predicate accepts."""
    out: dict[str, dict[str, set[str]]] = {}
    for path in sorted((common.ROOT / "daemon").rglob("*.py")):
        rel = path.relative_to(common.ROOT).as_posix()
        for node in ast.walk(common.parse(path)[1]):
            if isinstance(node, ast.Call):
                found = predicate(node)
                if found:
                    code, step = found
                    entry = out.setdefault(code, {"steps": set(), "files": set()})
                    entry["files"].add(rel)
                    if step:
                        entry["steps"].add(step)
    return dict(sorted(out.items()))


def _const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _run_fail(node: ast.Call) -> tuple[str, str] | None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "fail" and len(node.args) == 3:
        step, code = _const(node.args[0]), _const(node.args[2])
        if step and code:
            return code, step
    return None


def _conflict_state(node: ast.Call) -> tuple[str, str] | None:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name != "Conflict":
        return None
    state = _const(node.args[1]) if len(node.args) > 1 else None
    for keyword in node.keywords:
        if keyword.arg == "state":
            state = _const(keyword.value)
    return (state, "") if state else None


def run_errors() -> dict[str, dict[str, set[str]]]:
    return _calls(_run_fail)


def conflict_states() -> dict[str, dict[str, set[str]]]:
    return _calls(_conflict_state)


def judge_errors() -> tuple[str, ...]:
    from daemon.contract.judges import JudgeErrorCode

    return typing.get_args(JudgeErrorCode)


def _files(files: set[str]) -> str:
    return ", ".join(f"`{f}`" for f in sorted(files))


def render() -> str:
    out = [common.header(SCRIPT), "# Error codes\n",
           "## API errors\n",
           "Every answer that is not 2xx has the body `{\"error\": CODE, \"message\": \"...\", \"request_id\": \"...\", "
           "\"details\": {...}}`: `error` is one of the codes below, `message` says what and where in words, "
           "`details` carries the machine-readable part (`errors` with each invalid field's location for a 400, "
           "`resource` and `id` for a 404, `state` for a 409, `limit_bytes` for a 413, `retry_after` for a 429 or "
           "503, which also send `Retry-After`). `svc` prints them as one line: `svc: STATUS CODE: MESSAGE`.\n"]
    rows = [[f"`{status}`", f"`{code}`", f"`{name}`", doc or WHEN.get(code, "")] for status, code, name, doc in api_errors()]
    out.append(common.table(["Status", "Code", "Raised as", "When"], rows))
    out.append("## Conflict states\n")
    out.append("A 409 `conflict` names in `details.state` the state that refused the request:\n")
    rows = [[f"`{state}`", _files(entry["files"])] for state, entry in conflict_states().items()]
    out.append(common.table(["details.state", "Raised in"], rows))
    out.append("## Run and scenario errors\n")
    out.append("A run (or an experiment's scenario) that could not be judged ends with status `error` and "
               "`error: {step, message, code}`; `code` is one of these (the verdict is neither pass nor fail):\n")
    rows = [[f"`{code}`", ", ".join(f"`{s}`" for s in sorted(entry["steps"])), _files(entry["files"])]
            for code, entry in run_errors().items()]
    out.append(common.table(["Code", "Step", "Raised in"], rows))
    out.append("## Judge errors\n")
    out.append("An LLM judge or score rule that could not score gives `score: null` with `judge_error: {code, message}`, "
               "counted as unscored, never as 0. The codes:\n")
    out.append("\n".join(f"- `{code}`" for code in judge_errors()) + "\n")
    return "\n".join(out)
