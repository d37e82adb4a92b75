"""The test tree's own rules: a test module imports shared helpers from `tests.support` only, never
from another test module or a conftest (helpers live in one place, fixtures in thin conftests)."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):  # also imports inside functions
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative imports reach other test modules too
                found.append((node.lineno, "." * node.level + (node.module or "")))
            elif node.module:
                found.append((node.lineno, node.module))
                if node.module == "tests":
                    found += [(node.lineno, f"tests.{alias.name}") for alias in node.names]
    return found


def allowed(module: str) -> bool:
    if module.startswith("."):
        return False
    if module == "tests":
        return False
    if not module.startswith("tests."):
        return True
    return module == "tests.support" or module.startswith("tests.support.")


def test_test_modules_import_only_tests_support():
    modules = sorted(TESTS.rglob("test_*.py"))
    assert len(modules) > 20, modules  # the walk found the suite
    bad = []
    for path in modules:
        for lineno, module in imported_modules(ast.parse(path.read_text(), str(path))):
            if not allowed(module):
                bad.append(f"{path.relative_to(TESTS.parent)}:{lineno} imports {module}")
    assert bad == [], "test modules may import from tests.support only:\n" + "\n".join(bad)


def test_the_rule_catches_what_it_should():
    src = "from tests.api.test_x import f\nimport tests.docker.conftest\nfrom . import x\nfrom tests import api\n" \
          "from tests.support.api import Api\nimport tests.support\nimport os\n"
    verdicts = {m: allowed(m) for _, m in imported_modules(ast.parse(src))}
    assert verdicts == {"tests.api.test_x": False, "tests.docker.conftest": False, ".": False, "tests": False,
                        "tests.api": False, "tests.support.api": True, "tests.support": True, "os": True}


def test_make_test_runs_every_test_directory():
    """`make test` runs two groups side by side (IN_PROCESS_TESTS, ENGINE_TESTS): a test directory in
    neither would never run in CI."""
    import re

    makefile = (TESTS.parent / "Makefile").read_text()
    listed: set[str] = set()
    for name in ("IN_PROCESS_TESTS", "ENGINE_TESTS"):
        match = re.search(rf"^{name} \?= (.+)$", makefile, re.M)
        assert match, f"the Makefile defines no {name}"
        listed |= set(match.group(1).split())
    with_tests = {f"tests/{d.name}" for d in TESTS.iterdir() if d.is_dir() and any(d.glob("test_*.py"))}
    assert with_tests - listed == set()
