"""Register `svc mcp serve` in each editor agent's MCP configuration, merged structurally: other
servers and unknown keys stay, the old file is kept as .bak, an unparsable file is refused (the
snippet to add by hand is printed instead)."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from client.setup.plan import Change, read_text

SERVER_NAME = "svc"
COMMAND = ["svc", "mcp", "serve"]


class Unmergeable(ValueError):
    """The file exists but cannot be merged; `snippet` is what to add by hand."""

    def __init__(self, path: Path, reason: str, snippet: str):
        super().__init__(f"{path}: {reason}")
        self.snippet = snippet


def config_path(agent: str, project: Path, home: Path) -> Path:
    return {
        "claude": project / ".mcp.json",
        "cursor": project / ".cursor" / "mcp.json",
        "vscode": project / ".vscode" / "mcp.json",
        "codex": home / ".codex" / "config.toml",
        "gemini": home / ".gemini" / "settings.json",
    }[agent]


def _json_entry(agent: str) -> tuple[str, dict]:
    if agent == "vscode":
        return "servers", {"type": "stdio", "command": COMMAND[0], "args": COMMAND[1:]}
    return "mcpServers", {"command": COMMAND[0], "args": COMMAND[1:]}


def _covers(existing: dict, wanted: dict) -> bool:
    return all(existing.get(k) == v for k, v in wanted.items())


def plan_json(agent: str, path: Path) -> list[Change]:
    section, entry = _json_entry(agent)
    snippet = json.dumps({section: {SERVER_NAME: entry}}, indent=2)
    before = read_text(path)
    if before is None or not before.strip():
        data: dict = {}
    else:
        try:
            data = json.loads(before)
        except ValueError as exc:
            raise Unmergeable(path, f"not valid JSON ({exc})", snippet) from None
        if not isinstance(data, dict) or not isinstance(data.get(section, {}), dict):
            raise Unmergeable(path, f"expected an object with an object '{section}'", snippet)
    existing = data.get(section, {}).get(SERVER_NAME)
    existing = existing if isinstance(existing, dict) else {}
    if _covers(existing, entry):
        return []
    merged = dict(data)
    merged[section] = {**data.get(section, {}), SERVER_NAME: {**existing, **entry}}  # keys the user added (env, ...) stay
    return [Change(path, before, json.dumps(merged, indent=2) + "\n", backup=before is not None)]


def _toml_table() -> str:
    args = ", ".join(json.dumps(a) for a in COMMAND[1:])
    return f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(COMMAND[0])}\nargs = [{args}]\n"


TABLE_HEADER = re.compile(r"^\s*\[\s*mcp_servers\s*\.\s*\"?" + SERVER_NAME + r"\"?\s*\]\s*(#.*)?$")
ANY_HEADER = re.compile(r"^\s*\[")


def plan_toml(path: Path) -> list[Change]:
    """Codex's config.toml: only our one table is written; every other byte stays as it was."""
    table = _toml_table()
    before = read_text(path)
    text = before or ""
    try:
        current = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Unmergeable(path, f"not valid TOML ({exc})", table) from None
    wanted = {"command": COMMAND[0], "args": COMMAND[1:]}
    existing = current.get("mcp_servers", {}).get(SERVER_NAME)
    if isinstance(existing, dict) and _covers(existing, wanted):
        return []
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if TABLE_HEADER.match(line)), None)
    if start is None:
        if existing is not None:  # defined some other way (inline or dotted keys): leave it to the user
            raise Unmergeable(path, f"mcp_servers.{SERVER_NAME} is defined in a form svc does not rewrite", table)
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        after = text + sep + table
    else:
        end = next((i for i in range(start + 1, len(lines)) if ANY_HEADER.match(lines[i])), len(lines))
        after = "".join(lines[:start]) + table + ("\n" if end < len(lines) else "") + "".join(lines[end:])
    try:
        merged = tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:
        raise Unmergeable(path, f"merging would break the file ({exc})", table) from None
    if not _covers(merged.get("mcp_servers", {}).get(SERVER_NAME) or {}, wanted):
        raise Unmergeable(path, f"mcp_servers.{SERVER_NAME} could not be merged", table)
    return [Change(path, before, after, backup=before is not None)]


def plan(agent: str, project: Path, home: Path) -> list[Change]:
    path = config_path(agent, project, home)
    return plan_toml(path) if agent == "codex" else plan_json(agent, path)
