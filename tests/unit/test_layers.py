"""The import layers declared in pyproject.toml ([tool.importlinter]) hold: the contract is pure
pydantic, nothing below the API layer imports it, the store imports no service, and the TUI and the
client reach the daemon only over HTTP."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_layers_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "import-linter is a test dependency: pip install '.[test]'"
    result = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
