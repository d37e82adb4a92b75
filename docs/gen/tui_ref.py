"""The TUI screens page (docs/reference/tui.md): the text of every main screen as the snapshot tests
render it against a real daemon (the goldens in tests/tui/snapshots/, ids, clock times and ages
masked), so the captures in the docs are the ones the tests check, never drawn by hand."""
from __future__ import annotations

import ast
import re

import refcommon as common

SCRIPT = "tui_ref.py"
GOLDENS = common.ROOT / "tests" / "tui" / "snapshots"
# Screens in the order a session meets them; any other golden follows, by name.
ORDER = ("dashboard", "experiment", "run", "run_failed", "compare", "launch", "watch", "sandboxes", "help")
TITLES = {
    "dashboard": "The experiments dashboard (the first screen)",
    "experiment": "An experiment: its scenarios and metrics",
    "run": "A run: the trace tree beside the audit, checks, diff and reproducer",
    "run_failed": "A failed run: why on its first lines, opened on the tab that explains it",
    "compare": "Two experiments compared",
    "launch": "Launching a spec",
    "watch": "Watch mode",
    "sandboxes": "Live sandboxes",
    "help": "Help: every binding of the screen",
}
SIZE = re.compile(r"^(?P<screen>.+)_(?P<w>\d+)x(?P<h>\d+)\.txt$")


def goldens() -> dict[str, list[tuple[int, int, str]]]:
    """{screen: [(width, height, text), ...]} sorted by size, largest first."""
    found: dict[str, list[tuple[int, int, str]]] = {}
    for path in sorted(GOLDENS.glob("*.txt")):
        match = SIZE.match(path.name)
        if match:
            found.setdefault(match["screen"], []).append((int(match["w"]), int(match["h"]), path.read_text()))
    for sizes in found.values():
        sizes.sort(reverse=True)
    return found


def _const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _binding(call: ast.AST) -> tuple[str, str, bool] | None:
    """(keys, description, shown in the footer) of a literal `Binding(...)`."""
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) == "Binding"):
        return None
    args = [_const(a) for a in call.args]
    kw = {k.arg: k.value for k in call.keywords}
    keys = _const(kw.get("key_display")) or (args[0] if args else _const(kw.get("key")))
    description = (args[2] if len(args) > 2 else None) or _const(kw.get("description")) or ""
    show = not (isinstance(kw.get("show"), ast.Constant) and kw["show"].value is False)
    return (keys, description, show) if keys and description else None


def key_bindings() -> list[tuple[str, str, str, list[tuple[str, str, bool]]]]:
    """(screen title, module, help, bindings) of every class under tui/ with a literal BINDINGS list
    and a description: read from the source (importing every TUI module would start the app)."""
    out = []
    for path in sorted((common.ROOT / "tui").rglob("*.py")):
        tree = common.parse(path)[1]
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            bindings: list[tuple[str, str, bool]] = []
            crumb = help_text = None
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    name = stmt.targets[0].id
                    if name == "BINDINGS" and isinstance(stmt.value, ast.List):
                        bindings = [b for b in map(_binding, stmt.value.elts) if b]
                    elif name == "CRUMB":
                        crumb = _const(stmt.value)
                    elif name == "HELP":
                        try:
                            help_text = ast.literal_eval(stmt.value)
                        except ValueError:
                            help_text = None
            if bindings:
                title = crumb or cls.name
                out.append((title, path.relative_to(common.ROOT).as_posix() + f" ({cls.name})", help_text or "", bindings))
    return out


def _trim(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    blank = 0
    for line in lines:  # long runs of empty rows say nothing in a document; keep two
        blank = blank + 1 if not line else 0
        if blank <= 2:
            out.append(line)
    return "\n".join(out).strip("\n")


def render() -> str:
    found = goldens()
    names = [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)
    out = [common.header(SCRIPT), "# TUI screens\n",
           "`svc tui` (or `svc` with no arguments) follows the daemon live. These captures are the goldens of "
           "`tests/tui/test_snapshots.py`, which renders each screen against a real daemon and fails when what a "
           "user sees changes (ids show as `####`, clock times as `hh:mm:ss`, ages as `Ns`). Every screen has "
           "`?` for its bindings and `ctrl+p` for a palette of every action; themes: `--theme dark|light|high-contrast`, "
           "`SERVICE_THEME`, or `t`.\n"]
    for name in names:
        width, height, text = found[name][0]
        out.append(f"## {TITLES.get(name, name.replace('_', ' ').capitalize())}\n")
        out.append(f"At {width}x{height}:\n")
        out.append("```text\n" + _trim(text) + "\n```\n")
    out.append("## Keys\n")
    out.append("The bindings each screen and widget declares (`BINDINGS` in `tui/`); the footer shows the ones marked "
               "*footer*, `?` lists them all on the screen itself.\n")
    for title, where, help_text, bindings in key_bindings():
        out.append(f"### {title}\n")
        out.append(f"`{where}`" + (f": {' '.join(help_text.split())}" if help_text else "") + "\n")
        rows = [[f"`{keys}`", description, "footer" if show else ""] for keys, description, show in bindings]
        out.append(common.table(["Key", "Does", "Shown"], rows))
    return "\n".join(out)
