"""The real `svc` wheel built from the working tree (as `pip wheel` builds it for users), and fresh
venvs outside the checkout to install it into."""
from __future__ import annotations

import functools
import subprocess
import sys
import sysconfig
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
    """A venv with pip whose only extra is a .pth reaching the test venv's dependencies read-only:
    the machine's package indexes do not hold every dependency (textual), and downloading them
    would take minutes. The venv's own site-packages comes first, so its svc shadows any other."""
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    site = Path(subprocess.run([str(where / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_svc_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where


def install_wheel(venv_dir: Path, wheel: Path) -> None:
    subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
                   check=True, capture_output=True, timeout=300)


def svc_venv(where: Path) -> Path:
    """A fresh venv at `where` holding the svc wheel built from the checkout."""
    fresh_venv(where)
    install_wheel(where, svc_wheel())
    return where
