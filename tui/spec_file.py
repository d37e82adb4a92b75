"""What the launch screen and watch mode need to know about a local spec file, read with plain YAML
(the daemon's spec models stay in the daemon): its id, replicas, matrix, declared secrets and the
files it references (fixtures, SQL files, a snapshot agent's `source:` directory, secret files)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from client.agent_source import source_dir

@dataclass
class SecretStatus:
    name: str
    source: str
    ok: bool
    note: str


@dataclass
class SpecFile:
    path: Path
    doc: dict = field(default_factory=dict)
    error: str = ""

    @classmethod
    def read(cls, path: Path) -> "SpecFile":
        path = Path(path).expanduser()
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return cls(path, {}, f"cannot read {path}: {exc}")
        except yaml.YAMLError as exc:
            return cls(path, {}, f"YAML error: {exc}")
        return cls(path, doc if isinstance(doc, dict) else {}, "" if isinstance(doc, dict) else "not a YAML mapping")

    @property
    def spec_id(self) -> str:
        return str(self.doc.get("id") or self.path.stem)

    @property
    def parallelism(self) -> dict:
        value = self.doc.get("parallelism")
        return value if isinstance(value, dict) else {}

    @property
    def replicas(self) -> int:
        try:
            return max(1, int(self.parallelism.get("replicas") or 1))
        except (TypeError, ValueError):
            return 1

    @property
    def matrix(self) -> list[dict]:
        entries = self.parallelism.get("matrix")
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    def total_runs(self, replicas: int | None = None) -> int:
        return (replicas or self.replicas) * max(1, len(self.matrix))

    @property
    def secrets(self) -> dict[str, str]:
        value = self.doc.get("secrets")
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        if isinstance(value, list):  # [{name, source}] or [NAME]
            out = {}
            for entry in value:
                if isinstance(entry, dict) and entry.get("name"):
                    out[str(entry["name"])] = str(entry.get("source", "env"))
                elif isinstance(entry, str):
                    out[entry] = "env"
            return out
        return {}

    def resolve(self, relative: str) -> Path:
        path = Path(os.path.expanduser(relative))
        return path if path.is_absolute() else (self.path.parent / path)

    def referenced_paths(self) -> list[Path]:
        """Local files and directories a run of this spec reads: changing any of them makes a new
        run worthwhile in watch mode."""
        found: list[Path] = []
        fixtures = self.doc.get("fixtures")
        for fixture in fixtures if isinstance(fixtures, list) else []:
            if isinstance(fixture, dict) and isinstance(fixture.get("path"), str):
                found.append(self.resolve(fixture["path"]))
        agent_source = source_dir(self.doc.get("agent"), self.path)
        if agent_source is not None:  # a snapshot agent's local source: a change re-uploads it and re-runs
            found.append(agent_source)
        for source in self.secrets.values():
            if source.startswith("file:"):
                found.append(self.resolve(source[5:]))
        unique: list[Path] = []
        for path in found:
            resolved = path.resolve()
            if resolved not in unique:
                unique.append(resolved)
        return unique

    def secret_statuses(self) -> list[SecretStatus]:
        return [check_secret(name, source, self.path.parent) for name, source in self.secrets.items()]


def check_secret(name: str, source: str, base: Path) -> SecretStatus:
    """Whether a declared secret can be resolved locally, without revealing its value or running
    a `command:` source (client/local_spec.py's `probe_secret`)."""
    from client.local_spec import probe_secret

    ok, note = probe_secret(name, source, base)
    return SecretStatus(name, source, ok, note)


def resolve_secrets(spec: SpecFile) -> tuple[dict[str, Any], list[str]]:
    """Values for every declared secret but `dashboard` ones, and the problems found, with the
    client's one resolver (client/local_spec.py; relative to the spec file's directory)."""
    from client.local_spec import SecretResolutionError, resolve_secret

    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, source in spec.secrets.items():
        try:
            value = resolve_secret(name, source, spec.path.parent)
        except SecretResolutionError as exc:
            problems.append(str(exc))
            continue
        if value is not None:
            values[name] = value
    return values, problems
