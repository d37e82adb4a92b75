"""A spec file with its validation errors shown inline, under the line they point at."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from tui import format as f
from tui.data import SpecIssueRow


class SpecView(Static):
    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.path: Path | None = None
        self.source = ""
        self.issues: list[SpecIssueRow] = []

    def show(self, path: Path | None, source: str, issues: list[SpecIssueRow]) -> None:
        self.path, self.source, self.issues = path, source, issues
        self.update(self.render_text())

    def render_text(self) -> Text:
        variables = self.app.theme_variables if self.is_attached else None
        err = f.colour(variables, "error")
        text = Text()
        by_line: dict[int, list[SpecIssueRow]] = {}
        for issue in self.issues:
            if issue.line is None:
                text.append(f"✗ {issue.loc + ': ' if issue.loc else ''}{issue.msg}\n", style=f"bold {err}")
            else:
                by_line.setdefault(issue.line, []).append(issue)
        lines = self.source.splitlines()
        width = len(str(len(lines) or 1))
        for number, line in enumerate(lines, start=1):
            bad = number in by_line
            text.append(f"{number:>{width}} ", style=f"bold {err}" if bad else "dim")
            text.append(("▌" if bad else " "), style=err)
            text.append(line + "\n", style=f"bold {err}" if bad else "")
            for issue in by_line.get(number, []):
                indent = len(line) - len(line.lstrip())
                text.append(" " * (width + 2 + indent) + f"└─ {issue.loc}: {issue.msg}\n", style=f"italic {err}")
        for line_no in sorted(n for n in by_line if n > len(lines)):
            for issue in by_line[line_no]:
                text.append(f"line {line_no}: {issue.loc}: {issue.msg}\n", style=err)
        return text

    def first_issue_offset(self) -> int:
        """Rendered line of the first issue (to scroll to it)."""
        lines = [i.line for i in self.issues if i.line is not None]
        if not lines:
            return 0
        unlocated = sum(1 for i in self.issues if i.line is None)
        return unlocated + min(lines) - 1
