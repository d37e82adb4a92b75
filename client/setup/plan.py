"""What a phase plans: file changes shown as diffs before they are written."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

AGENTS = ("claude", "cursor", "vscode", "codex", "gemini")


@dataclass
class Change:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str
    backup: bool = False  # keep the old file as <name>.bak before writing
    brief: str | None = None  # shown instead of the diff (a generated file too long to read as one)

    def diff(self) -> str:
        if self.brief is not None:
            return f"{'create' if self.before is None else 'update'} {self.path}: {self.brief}\n"
        old = [] if self.before is None else self.before.splitlines(keepends=True)
        lines = difflib.unified_diff(old, self.after.splitlines(keepends=True),
                                     "/dev/null" if self.before is None else str(self.path), str(self.path))
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def apply(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.backup and self.before is not None:
            self.path.with_name(self.path.name + ".bak").write_text(self.before)
        tmp = self.path.with_name(self.path.name + ".svc-tmp")
        tmp.write_text(self.after)
        if self.path.exists():
            os.chmod(tmp, self.path.stat().st_mode & 0o777)
        os.replace(tmp, self.path)


@dataclass
class PhaseResult:
    phase: str
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped or refused, and why
    failed: bool = False
    refused: bool = False  # a file svc would not touch (unparsable): its snippet is in the notes
    applied: bool = False
    pending: bool = False  # work not expressed as a file change (an upload) that a real run would do
    data: dict = field(default_factory=dict)  # extra facts for --json (checks, snapshot)

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.refused:
            return "refused"
        if self.applied:
            return "changed"
        if self.changes or self.pending:
            return "pending"
        return "no change"

    def summary(self) -> dict:
        return {"phase": self.phase, "status": self.status, "files": [str(c.path) for c in self.changes],
                "notes": self.notes, **self.data}


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def planned(path: Path, text: str, backup: bool = False, brief: str | None = None) -> list[Change]:
    """A change only when the file's content differs."""
    before = read_text(path)
    return [] if before == text else [Change(path, before, text, backup, brief)]


def parse_agents(text: str) -> tuple[str, ...]:
    """`claude,cursor` or `all`; ValueError naming an unknown one."""
    if text.strip() == "all":
        return AGENTS
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in AGENTS]
    if unknown or not names:
        raise ValueError(f"--agents: unknown agent {', '.join(unknown) or '(none)'}; choose from {','.join(AGENTS)} or all")
    return names


def detect_agents(project: Path, home: Path) -> tuple[str, ...]:
    """The editors this project or user already uses; Claude Code when none is found."""
    marks = {
        "claude": (project / ".claude", project / "CLAUDE.md", project / ".mcp.json"),
        "cursor": (project / ".cursor",),
        "vscode": (project / ".vscode",),
        "codex": (home / ".codex", project / "AGENTS.md"),
        "gemini": (home / ".gemini", project / "GEMINI.md"),
    }
    found = tuple(name for name, paths in marks.items() if any(p.exists() for p in paths))
    return found or ("claude",)
