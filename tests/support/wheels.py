"""The real `svc` wheel built from the working tree (as `pip wheel` builds it for users), installed
with its dependencies into fresh venvs outside the checkout."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from tests.support.procs import ROOT


@functools.cache
def svc_wheel() -> Path:
    """Built once per test session from the tracked and new files of the checkout (tests excluded)."""
    work = Path(tempfile.mkdtemp(prefix="svc-wheel-"))
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True)
    source = work / "src"
    for rel in listed.stdout.splitlines():
        path = ROOT / rel
        if rel.startswith("tests/") or not path.is_file():
            continue
        target = source / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    return next((work / "dist").glob("svc-*.whl"))


def fresh_venv(where: Path) -> Path:
    """A plain venv with pip and nothing else: no system site-packages, no path into the checkout or
    the test venv."""
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    return where


def install_wheel(venv_dir: Path, wheel: Path) -> None:
    """`pip install svc-*.whl` as a user runs it: the dependencies resolved from the package indexes
    pip is configured with (its cache keeps a repeat to seconds)."""
    result = subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                            capture_output=True, text=True, timeout=900, cwd=venv_dir)
    if result.returncode != 0:
        raise RuntimeError(f"pip install {wheel.name} failed:\n{result.stderr[-4000:]}")


def svc_venv(where: Path) -> Path:
    """A fresh venv at `where` holding the svc wheel built from the checkout and its dependencies."""
    fresh_venv(where)
    install_wheel(where, svc_wheel())
    return where


def linked_copy(venv_dir: Path, copy: Path) -> Path:
    """A copy of a venv whose files are hard links (pip replaces files, never writes into them, so an
    upgrade in the copy leaves the original alone); scripts are rewritten for the new path."""
    shutil.copytree(venv_dir, copy, symlinks=True, copy_function=os.link)
    for script in (copy / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            text = script.read_bytes()
            if text.startswith(b"#!") and str(venv_dir).encode() in text:
                mode = script.stat().st_mode
                script.unlink()  # a new file: writing through the link would change the original
                script.write_bytes(text.replace(str(venv_dir).encode(), str(copy).encode()))
                script.chmod(mode)
    return copy
