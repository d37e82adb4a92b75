"""The documentation site's references are generated from the code (docs/gen/) and committed: these
tests fail when a committed page is stale, and check each page against the code by another route
than its generator (the parser's own tree, the route table, the pydantic models, a plain-text scan),
so an item a generator missed fails too. The hand-written pages are checked where they name code:
every `svc ...` command shown must parse, every relative link of the README must resolve."""
from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"


def _generator(name: str):
    """A module of docs/gen/ (not a package: mkdocs loads the hook by path)."""
    gen = str(DOCS / "gen")
    if gen not in sys.path:
        sys.path.insert(0, gen)
    spec = importlib.util.spec_from_file_location(name, DOCS / "gen" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated():
    return _generator("generate").pages()


def test_the_committed_reference_pages_are_current(generated):
    stale = [str(path.relative_to(ROOT)) for path, text in generated.items()
             if not path.exists() or path.read_text() != text]
    assert not stale, f"stale generated pages {stale}: run `make docs` (or python docs/gen/generate.py) and commit them"


def _commands(parser: argparse.ArgumentParser, path: str = "svc", seen: set[int] | None = None):
    """Every command path with its parser; an alias (`svc sb`) is its own path, its subcommands are not."""
    seen = set() if seen is None else seen
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _commands(sub, f"{path} {name}", seen)


def test_every_cli_command_and_flag_is_in_the_cli_reference():
    from client.cli import build_parser

    page = (REFERENCE / "cli.md").read_text()
    missing = []
    for path, parser in _commands(build_parser()):
        parent, _, name = path.rpartition(" ")
        if f"# {path} {{#" not in page and f"`{parent} {name}`" not in page:  # a command's heading, or an alias line
            missing.append(path)
            continue
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help") and action.help != argparse.SUPPRESS and flag not in page:
                    missing.append(f"{path} {flag}")
    assert not missing, f"not in docs/reference/cli.md: {missing}"


def test_every_route_is_in_the_api_reference():
    from daemon.contract import routes

    page = (REFERENCE / "api.md").read_text()
    table = [r for r in vars(routes).values() if isinstance(r, routes.Route)]
    heading = re.compile(r"\{(\w+)(:[^}]*)?\}")  # an aiohttp template's regex part is not in the document's path
    missing = [f"{r.method} {r.path}" for r in table
               if "### " + r.method + " " + heading.sub(r"{\1}", r.path) + " " not in page]
    assert table and not missing, f"routes not in docs/reference/api.md: {missing}"


def _spec_keys() -> set[str]:
    """Every key of every model reachable from the spec document, walked through pydantic's fields."""
    import typing

    from pydantic import BaseModel

    from daemon.spec import SpecDocument

    keys: set[str] = set()
    seen: set[type] = set()
    stack: list[type] = [SpecDocument]
    while stack:
        model = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            keys.add(field.alias or name)
            inner = [field.annotation]
            while inner:
                annotation = inner.pop()
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    stack.append(annotation)
                inner += list(typing.get_args(annotation))
    return keys


def test_every_spec_key_is_in_the_spec_reference():
    page = (REFERENCE / "spec.md").read_text()
    missing = sorted(key for key in _spec_keys() if f"| `{key}` |" not in page and f".{key}` |" not in page)
    assert not missing, f"spec keys not in docs/reference/spec.md: {missing}"


def test_every_note_of_the_spec_reference_names_a_key_the_spec_has():
    spec_ref = _generator("spec_ref")
    schema = spec_ref.schema()
    keys = {("document", key) for key in schema["properties"]}
    keys |= {(name, key) for name, definition in schema["$defs"].items() for key in definition.get("properties", {})}
    stale = sorted(set(spec_ref.NOTES) - keys)
    assert spec_ref.NOTES and not stale, f"docs/gen/spec_ref.py NOTES for keys the spec no longer has: {stale}"


ENV_READ = re.compile(r"""(?:environ\.get|getenv|environ\[|lookup|_env_\w+|_float)\(?\s*["'](SERVICE_[A-Z0-9_]+)["']""")


def test_every_environment_variable_read_is_in_the_reference():
    page = (REFERENCE / "environment.md").read_text()
    read = {name for package in ("daemon", "client", "tui") for path in (ROOT / package).rglob("*.py")
            for name in ENV_READ.findall(path.read_text())}
    missing = sorted(name for name in read if f"`{name}`" not in page)
    assert read and not missing, f"environment variables not in docs/reference/environment.md: {missing}"


def test_every_error_code_is_in_the_errors_reference():
    from daemon.openapi import ERROR_CODES

    page = (REFERENCE / "errors.md").read_text()
    codes = set(ERROR_CODES.values()) | set(re.findall(r'code = \d+, "(\w+)"', (ROOT / "daemon" / "errors.py").read_text()))
    codes |= set(re.findall(r'\.fail\(\s*"\w+",.*?"(\w+)"\)', "\n".join(
        p.read_text() for p in (ROOT / "daemon" / "runner").rglob("*.py")), re.S))
    missing = sorted(code for code in codes if f"`{code}`" not in page)
    assert codes and not missing, f"error codes not in docs/reference/errors.md: {missing}"


def test_every_tui_screen_is_in_the_tui_page():
    page = (REFERENCE / "tui.md").read_text()
    largest: dict[str, tuple[int, int, Path]] = {}
    for path in (ROOT / "tests" / "tui" / "snapshots").glob("*.txt"):
        match = re.fullmatch(r"(.+)_(\d+)x(\d+)\.txt", path.name)
        if match:
            size = (int(match[2]), int(match[3]), path)
            largest[match[1]] = max(largest.get(match[1], size), size)
    missing = [path.name for _, _, path in largest.values() if path.read_text().splitlines()[0].rstrip() not in page]
    assert largest and not missing, f"TUI captures not in docs/reference/tui.md: {missing}"


def _shown_commands() -> list[tuple[str, str]]:
    """(where, command line) of every `svc ...` line in the sh blocks of the hand-written pages and the README."""
    pages = [ROOT / "README.md"] + [p for p in DOCS.rglob("*.md") if "reference" not in p.parts and "gen" not in p.parts]
    out = []
    for page in pages:
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                line = line.strip()
                if line.startswith("svc "):
                    out.append((str(page.relative_to(ROOT)), line))
    return out


def test_every_svc_command_shown_in_the_docs_parses():
    from client.cli import build_parser

    parser = build_parser()
    shown = _shown_commands()
    refused = []
    for where, line in shown:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = []
        for word in lexer:
            if word and set(word) <= set(";&|<>"):
                break  # a pipe, a redirection or the next command
            words.append(word)
        try:
            parser.parse_args(words[1:])
        except SystemExit:
            refused.append(f"{where}: {line}")
    tutorials = [line for where, line in shown if where.startswith("docs/tutorials/")]
    assert tutorials and not refused, "commands the svc parser refuses:\n" + "\n".join(refused)


def _shown_specs() -> list[tuple[str, str]]:
    """(where, YAML) of every whole spec the README and the hand-written pages show: a yaml block, or
    a here-document in an sh block, that starts a document with `version:`."""
    pages = [ROOT / "README.md"] + [p for p in DOCS.rglob("*.md") if "reference" not in p.parts and "gen" not in p.parts]
    out = []
    for page in pages:
        text = page.read_text()
        bodies = re.findall(r"```yaml\n(.*?)```", text, re.S) + re.findall(r"<<'YAML'\n(.*?)^YAML$", text, re.S | re.M)
        out += [(str(page.relative_to(ROOT)), body) for body in bodies if re.search(r"^version:", body, re.M)]
    return out


def test_every_whole_spec_shown_in_the_docs_is_valid():
    import yaml

    from daemon.spec import SpecDocument

    shown = _shown_specs()
    refused = []
    for where, body in shown:
        try:
            SpecDocument.model_validate(yaml.safe_load(body))
        except Exception as exc:  # a YAML or a validation error: either way the page shows a spec that does not load
            refused.append(f"{where}: {str(exc).splitlines()[0]}")
    assert shown and not refused, "specs in the docs the daemon refuses:\n" + "\n".join(refused)


def test_every_make_target_the_docs_name_exists():
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    pages = [ROOT / "README.md", *(p for p in DOCS.rglob("*.md") if "reference" not in p.parts)]
    named = {(str(p.relative_to(ROOT)), t) for p in pages for t in re.findall(r"`make ([a-z][\w-]*)", p.read_text())}
    named |= {(str(p.relative_to(ROOT)), t) for p in pages for t in re.findall(r"^make ([a-z][\w-]*)", p.read_text(), re.M)}
    missing = sorted(f"{where}: make {target}" for where, target in named if target not in targets)
    assert ("README.md", "docs") in named and not missing, f"make targets the docs name that the Makefile lacks: {missing}"


def test_the_readme_links_into_the_docs_and_every_link_resolves():
    text = (ROOT / "README.md").read_text()
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in link]
    missing = sorted({link for link in links if link and not (ROOT / link).exists()})
    assert any(link.startswith("docs/tutorials/") for link in links) and not missing, f"README links to missing files: {missing}"


def test_the_readme_is_short_and_states_the_test_command_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200 and "make test" in ci and "make test      # the whole test suite" in readme


def test_the_performance_page_names_every_benchmark():
    page = (DOCS / "explanation" / "performance.md").read_text()
    benches = sorted(p.stem for p in (ROOT / "tests" / "bench").glob("bench_*.py"))
    missing = [b for b in benches if f"`{b}`" not in page]
    assert benches and not missing, f"benchmarks not on docs/explanation/performance.md: {missing}"


def test_an_optional_page_joins_the_nav_when_it_exists(tmp_path):
    hook = _generator("hook")
    (tmp_path / "traces-conventions.md").write_text("# Trace conventions\n")
    config = {"docs_dir": str(tmp_path), "nav": [{"Home": "index.md"}, {"Reference": [{"Spec": "reference/spec.md"}]}]}
    nav = hook.on_config(config)["nav"]
    assert nav[1]["Reference"][-1] == {"Trace conventions": "traces-conventions.md"}
