"""Find OpenAI/Anthropic clients in the agent's Python code and plan the two-line change that traces
them: one import, and the constructor wrapped (`client = wrap_openai(OpenAI())`)."""
from __future__ import annotations

import ast
from pathlib import Path

from client.setup.plan import Change

WRAPPERS = {"OpenAI": "wrap_openai", "AsyncOpenAI": "wrap_openai", "AzureOpenAI": "wrap_openai",
            "AsyncAzureOpenAI": "wrap_openai", "Anthropic": "wrap_anthropic", "AsyncAnthropic": "wrap_anthropic"}
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".tox", "site-packages"}
MAX_FILES = 2000
MAX_FILE_BYTES = 1_000_000
SDK_FILE = "svc_tracing.py"


def python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack and len(found) < MAX_FILES:
        for path in sorted(stack.pop().iterdir()):
            if path.is_dir() and not path.is_symlink() and path.name not in SKIP_DIRS:
                stack.append(path)
            elif path.suffix == ".py" and path.is_file() and path.name != SDK_FILE:
                found.append(path)
    return found[:MAX_FILES]


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _constructors(tree: ast.AST) -> list[ast.Call]:
    """Client constructor calls not already inside a wrap_* call."""
    wrapped: set[int] = set()
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in set(WRAPPERS.values()):
            wrapped.update(id(arg) for arg in node.args)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in WRAPPERS and id(node) not in wrapped:
            calls.append(node)
    return calls


def _import_line(tree: ast.Module) -> int:
    """0-based line after the leading docstring and imports: where the new import goes."""
    line = 0
    for index, stmt in enumerate(tree.body):
        is_doc = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
        if is_doc or isinstance(stmt, (ast.Import, ast.ImportFrom)):
            line = stmt.end_lineno or line
        else:
            break
    return line


def rewrite(text: str, module: str) -> str | None:
    """The traced source, or None when there is nothing to change (or it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    calls = _constructors(tree)
    if not calls:
        return None
    lines = text.splitlines(keepends=True)
    # Last call first so earlier offsets stay valid; col offsets are in UTF-8 bytes.
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        wrapper = WRAPPERS[_name(call.func) or ""]
        start_row, end_row = call.lineno - 1, (call.end_lineno or call.lineno) - 1
        end_line = lines[end_row].encode()
        lines[end_row] = (end_line[: call.end_col_offset] + b")" + end_line[call.end_col_offset:]).decode()
        start_line = lines[start_row].encode()
        lines[start_row] = (start_line[: call.col_offset] + wrapper.encode() + b"(" + start_line[call.col_offset:]).decode()
    needed = sorted({WRAPPERS[_name(c.func) or ""] for c in calls})
    have = {alias.name for stmt in tree.body if isinstance(stmt, ast.ImportFrom) and stmt.module == module for alias in stmt.names}
    missing = [name for name in needed if name not in have]
    if missing:
        at = _import_line(tree)
        if at and not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines.insert(at, f"from {module} import {', '.join(missing)}\n")
    return "".join(lines)


def plan(project: Path, module: str) -> list[Change]:
    changes: list[Change] = []
    for path in python_files(project):
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        after = rewrite(text, module)
        if after is not None and after != text:
            changes.append(Change(path, text, after))
    return changes
