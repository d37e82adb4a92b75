"""The store owns SQL: every statement the daemon sends to its own SQLite store is written in
daemon/store/, and the store does not depend on the web layer.

Two checks, both by walking the source with `ast` (no import-linter needed):

- no string literal outside daemon/store/ looks like SQL (string constants and the literal parts
  of f-strings), apart from the SQL the daemon sends to a sandbox's PostgreSQL (db_audit and the
  `sql` check), which is not store SQL;
- no module under daemon/store/ imports daemon.http, daemon.middleware, daemon.sse or daemon.api,
  at module level or inside a function.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAEMON = ROOT / "daemon"
STORE = DAEMON / "store"

# SQL sent to a sandbox's PostgreSQL, not to the daemon's store
NOT_STORE_SQL = {DAEMON / "sandbox" / "db_audit.py", DAEMON / "scoring" / "checks" / "sql.py"}

SQL = re.compile(r"\b(SELECT|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX))\b")

WEB_LAYER = ("daemon.http", "daemon.middleware", "daemon.sse", "daemon.api")


def _daemon_files(exclude_store: bool) -> list[Path]:
    files = []
    for path in sorted(DAEMON.rglob("*.py")):
        if exclude_store and STORE in path.parents:
            continue
        if path in NOT_STORE_SQL:
            continue
        files.append(path)
    return files


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings (prose may name a statement)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                ids.add(id(body[0].value))
    return ids


def sql_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal in `path` that looks like SQL. An f-string counts by
    its literal parts joined (a placeholder stands in for each expression)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _docstrings(tree)
    inside_fstring = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inside_fstring.add(id(value))
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                else:
                    parts.append(" x ")
            text = "".join(parts)
            if SQL.search(text):
                found.append((node.lineno, text))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and id(node) not in inside_fstring and SQL.search(node.value):
            found.append((node.lineno, node.value))
    return sorted(found)


def test_no_sql_outside_the_store():
    offenders = []
    for path in _daemon_files(exclude_store=True):
        for line, text in sql_literals(path):
            snippet = " ".join(text.split())[:80]
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {snippet}")
    assert not offenders, "SQL outside daemon/store/ (move it into a store module):\n" + "\n".join(offenders)


def test_the_check_sees_sql(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""SELECT in a docstring is prose."""\n'
        'A = "SELECT * FROM runs WHERE id = ?"\n'
        'B = f"UPDATE runs SET {col} = ? WHERE id = ?"\n'
        'C = ("INSERT INTO t (a) "\n     "VALUES (?)")\n'
        'D = "select the model"\n'
        'def f(n):\n    return f"DELETE FROM t WHERE id IN ({n})"\n'
    )
    assert [line for line, _ in sql_literals(sample)] == [2, 3, 4, 8]


def _imported_modules(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, module) of every import in `tree`, wherever it is (functions included); relative
    imports are resolved against `module`."""
    found = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            # `from daemon import http` names a module too
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def _web_layer(name: str) -> bool:
    return any(name == layer or name.startswith(layer + ".") for layer in WEB_LAYER)


def _module_file(name: str) -> Path | None:
    """The source file of a daemon module (a package's __init__.py), or None when it is not one."""
    if not name.startswith("daemon"):
        return None
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _daemon_imports(module: str) -> list[tuple[int, str]]:
    """(line, module) of the daemon modules `module` imports, packages on the way included."""
    path = _module_file(module)
    if path is None:
        return []
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for line, name in _imported_modules(tree, module if path.name != "__init__.py" else module + ".x"):
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if _module_file(prefix) is not None:
                found.append((line, prefix))
    return found


def test_the_store_does_not_import_the_web_layer():
    """Directly or through another daemon module (store/scores.py -> traces/query.py -> http.py
    was such a path)."""
    offenders = []
    for path in sorted(STORE.rglob("*.py")):
        start = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        via: dict[str, tuple[str, int]] = {start: ("", 0)}
        queue = [start]
        while queue:
            current = queue.pop()
            for line, name in _daemon_imports(current):
                if name in via:
                    continue
                via[name] = (current, line)
                if _web_layer(name):
                    chain, step = [], name
                    while step != start:
                        parent, at = via[step]
                        chain.append(f"{parent}:{at} imports {step}")
                        step = parent
                    offenders.append(" <- ".join(chain))
                    continue
                queue.append(name)
    assert not offenders, "daemon/store/ imports the web layer:\n" + "\n".join(sorted(set(offenders)))
