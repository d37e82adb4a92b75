"""mkdocs hook (mkdocs.yml `hooks:`): writes the generated pages before every build, so `mkdocs build`
and `mkdocs serve` show the code as it is now, and puts the optional pages that exist into the nav."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate  # noqa: E402

# Pages other work may add: (file under docs/, nav section, title). Listed when the file exists.
OPTIONAL = (
    ("traces-conventions.md", "Reference", "Trace conventions"),
)


def on_config(config, **kwargs):
    docs = Path(config["docs_dir"])
    for name, section, title in OPTIONAL:
        if not (docs / name).exists():
            continue
        for entry in config["nav"]:
            if isinstance(entry, dict) and section in entry:
                if not any(isinstance(item, dict) and name in item.values() for item in entry[section]):
                    entry[section].append({title: name})
    return config


def on_pre_build(config, **kwargs) -> None:
    generate.write()
