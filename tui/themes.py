"""Load the themes in `themes/` (`NAME.toml` colour definitions + `NAME.tcss` scoped rules) as
Textual `Theme` objects. Extra themes may live in `$SERVICE_HOME/themes` or `$SERVICE_THEMES_DIR`."""
from __future__ import annotations

import importlib.resources
import os
import tomllib
from dataclasses import fields
from pathlib import Path

from textual.theme import Theme

DEFAULT_THEME = "dark"


def _bundled_dir() -> Path:
    """The wheel's package data (the top-level themes/ ships as tui.bundled_themes, pyproject package-dir),
    found through importlib.resources; in a checkout, themes/ beside tui/."""
    try:
        found = importlib.resources.files("tui.bundled_themes")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "themes"
    return Path(str(found))


BUNDLED_DIR = _bundled_dir()
_THEME_FIELDS = {f.name for f in fields(Theme)}


def theme_dirs(home: Path | None = None) -> list[Path]:
    dirs = [BUNDLED_DIR]
    if home is not None:
        dirs.append(home / "themes")
    if os.environ.get("SERVICE_THEMES_DIR"):
        dirs.append(Path(os.environ["SERVICE_THEMES_DIR"]).expanduser())
    return [d for d in dirs if d.is_dir()]


def load_theme(path: Path) -> Theme:
    """One `NAME.toml`: a [theme] table of Theme fields and an optional [variables] table."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    table = dict(doc.get("theme", {}))
    table.setdefault("name", path.stem)
    unknown = set(table) - _THEME_FIELDS
    if unknown:
        raise ValueError(f"{path}: unknown theme keys {sorted(unknown)}")
    variables = {str(k): str(v) for k, v in doc.get("variables", {}).items()}
    return Theme(**table, variables=variables)


def load_themes(home: Path | None = None) -> tuple[dict[str, Theme], list[Path]]:
    """Every theme found (later directories override earlier ones) and the .tcss files beside them."""
    themes: dict[str, Theme] = {}
    css: list[Path] = []
    for directory in theme_dirs(home):
        for toml in sorted(directory.glob("*.toml")):
            theme = load_theme(toml)
            themes[theme.name] = theme
            tcss = toml.with_suffix(".tcss")
            if tcss.exists():
                css.append(tcss)
    return themes, css


def choose(requested: str | None, available: dict[str, Theme] | list[str]) -> str:
    """`--theme`, else `SERVICE_THEME`, else the default; unknown names fall back to the default."""
    name = requested or os.environ.get("SERVICE_THEME") or DEFAULT_THEME
    return name if name in available else DEFAULT_THEME
