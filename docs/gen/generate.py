"""Writes the generated reference pages under docs/reference/ from the code, or with --check lists
the ones that are stale (exit 1). The mkdocs build runs it through docs/gen/hook.py, so the site
always shows the code it was built from; tests/unit/test_docs_reference.py fails on a stale page."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_ref  # noqa: E402
import cli_ref  # noqa: E402
import refcommon as common  # noqa: E402
import env_ref  # noqa: E402
import errors_ref  # noqa: E402
import harbor_ref  # noqa: E402
import spec_ref  # noqa: E402
import tui_ref  # noqa: E402

REFERENCE = common.ROOT / "docs" / "reference"
SECURITY = common.ROOT / "SECURITY.md"


def security_page() -> str:
    """SECURITY.md (the threat model, kept at the top of the repository where people look for it)."""
    return common.header("generate.py (a copy of SECURITY.md)") + SECURITY.read_text()


def pages() -> dict[Path, str]:
    common.use_checkout()
    openapi = api_ref.document()
    return {
        REFERENCE / "spec.md": spec_ref.render(),
        REFERENCE / "cli.md": cli_ref.render(),
        REFERENCE / "api.md": api_ref.render(openapi),
        REFERENCE / "openapi.json": api_ref.openapi_json(openapi),
        REFERENCE / "environment.md": env_ref.render(),
        REFERENCE / "errors.md": errors_ref.render(),
        REFERENCE / "tui.md": tui_ref.render(),
        REFERENCE / "harbor.md": harbor_ref.render(),
        common.ROOT / "docs" / "explanation" / "security.md": security_page(),
    }


def stale(generated: dict[Path, str] | None = None) -> list[Path]:
    generated = generated if generated is not None else pages()
    return [path for path, text in generated.items() if not path.exists() or path.read_text() != text]


def write(generated: dict[Path, str] | None = None) -> list[Path]:
    """Writes the pages that changed (only those: `mkdocs serve` watches these files)."""
    generated = generated if generated is not None else pages()
    changed = stale(generated)
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated[path])
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="list stale pages and exit 1 instead of writing them")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for path in paths:
            print(f"stale: {path.relative_to(common.ROOT)} (python docs/gen/generate.py writes it)", file=sys.stderr)
        return 1 if paths else 0
    for path in write():
        print(f"wrote {path.relative_to(common.ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
