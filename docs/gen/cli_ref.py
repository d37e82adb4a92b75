"""The CLI reference (docs/reference/cli.md), from `svc`'s own argument parser (client.cli.build_parser):
every command and subcommand, its aliases, help, positional arguments and flags with their defaults."""
from __future__ import annotations

import argparse
from typing import Any, Iterator

import refcommon as common

SCRIPT = "cli_ref.py"


def parser() -> argparse.ArgumentParser:
    from client.cli import build_parser

    return build_parser()


def _subcommands(p: argparse.ArgumentParser) -> Iterator[tuple[str, list[str], str, argparse.ArgumentParser]]:
    """(name, aliases, help, parser) of each subcommand, aliases folded into the first name."""
    for action in p._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        seen: dict[int, tuple[str, list[str]]] = {}
        order: list[int] = []
        for name, sub in action.choices.items():
            if id(sub) in seen:
                seen[id(sub)][1].append(name)
            else:
                seen[id(sub)] = (name, [])
                order.append(id(sub))
        by_id = {id(sub): sub for sub in action.choices.values()}
        for key in order:
            name, aliases = seen[key]
            yield name, aliases, helps.get(name, ""), by_id[key]


def commands(p: argparse.ArgumentParser | None = None, path: str = "svc") -> list[tuple[str, list[str], str, argparse.ArgumentParser]]:
    """Every command path (`svc eval run`), depth first, with its aliases, help and parser."""
    p = p or parser()
    out = []
    for name, aliases, help_text, sub in _subcommands(p):
        full = f"{path} {name}"
        out.append((full, aliases, help_text, sub))
        out += commands(sub, full)
    return out


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        meta = action.metavar or action.dest.upper()
        if action.nargs in ("*", "?"):
            meta = f"[{meta}]"
        elif action.nargs == "+":
            meta = f"{meta} ..."
        return f"`{meta}`"
    text = ", ".join(action.option_strings)
    if action.nargs != 0:
        meta = action.metavar or action.dest.upper()
        if action.choices and not action.metavar:
            meta = "{" + ",".join(str(c) for c in action.choices) + "}"
        if isinstance(meta, tuple):
            meta = " ".join(meta)
        text += f" {meta}"
    return f"`{text}`"


def _default(action: argparse.Action) -> str:
    value: Any = action.default
    if value in (None, argparse.SUPPRESS) or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "–"
    if isinstance(value, (list, tuple)) and not value:
        return "–"
    return f"`{value}`"


def _help(p: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as `--help` shows it (`%(default)s` filled in, `%%` as `%`)."""
    text = action.help or ""
    params = {**vars(action), "prog": p.prog}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    try:
        return text % params
    except (KeyError, TypeError, ValueError):
        return text


def _arguments(p: argparse.ArgumentParser) -> list[list[str]]:
    rows = []
    for action in p._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        rows.append([_flag(action), _default(action), " ".join(_help(p, action).split())])
    return rows


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


def render() -> str:
    root = parser()
    out = [common.header(SCRIPT), "# CLI reference\n",
           "Every command of `svc`, from its argument parser. Data goes to stdout as JSON, messages to stderr; "
           "every failure, usage errors included, is one line on stderr and exit code 1. `svc COMMAND --help` "
           "prints the same from the command line.\n",
           "## svc {#svc}\n", " ".join((root.description or "").split()) + "\n",
           "Global flags, given before the command:\n", common.table(["Argument", "Default", "Help"], _arguments(root))]
    all_commands = commands(root)
    out.append("Commands:\n")
    out.append("\n".join(f"- [`{path}`](#{_anchor(path)})" + (f": {' '.join(h.split())}" if h else "")
                         for path, _, h, _ in all_commands if path.count(" ") == 1) + "\n")
    for path, aliases, help_text, sub in all_commands:
        level = "#" * min(2 + path.count(" ") - 1, 4)
        out.append(f"{level} {path} {{#{_anchor(path)}}}\n")
        if aliases:
            out.append("Also: " + ", ".join(f"`{' '.join(path.split()[:-1] + [a])}`" for a in aliases) + ".\n")
        text = " ".join((sub.description or help_text or "").split())
        if text:
            out.append(text + "\n")
        out.append(f"```\n{' '.join(sub.format_usage().split())}\n```\n")
        rows = _arguments(sub)
        if rows:
            out.append(common.table(["Argument", "Default", "Help"], rows))
    return "\n".join(out)
