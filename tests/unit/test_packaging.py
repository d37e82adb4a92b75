"""What a user's `pip install .` (not editable) gets: the wheel holds every package of the tree and
every data file the product opens at run time, and the installed copy works from outside the checkout."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    return next(out.glob("svc-*.whl"))


def _names(wheel: Path) -> set[str]:
    return set(zipfile.ZipFile(wheel).namelist())


def test_every_package_of_the_tree_is_in_the_wheel(wheel):
    packages = sorted(str(p.parent.relative_to(ROOT)) for top in ("daemon", "client", "tui")
                      for p in (ROOT / top).rglob("__init__.py"))
    missing = [p for p in packages if f"{p}/__init__.py" not in _names(wheel)]
    assert missing == []


def test_data_files_the_product_opens_are_in_the_wheel(wheel):
    tracked = subprocess.run(["git", "ls-files", "daemon", "tui", "themes"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    wanted = [f for f in tracked if not f.endswith(".py") and not f.endswith(".txt")]
    expected = {("tui/bundled_themes/" + f.split("/", 1)[1]) if f.startswith("themes/") else f for f in wanted}
    assert sorted(expected - _names(wheel)) == []


def test_installed_copy_loads_its_bundled_themes(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    code = "import tui.themes as t; print(sorted(t.load_themes()[0]), t.BUNDLED_DIR)"
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("['dark', 'high-contrast', 'light'] " + str(target))
