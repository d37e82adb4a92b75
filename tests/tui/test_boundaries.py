"""The TUI attaches to the daemon through client/ only: importing every tui module (and the two CLI
commands it owns) must not import daemon/."""
from __future__ import annotations

import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys, tui
for m in pkgutil.walk_packages(tui.__path__, "tui."):
    if m.name != "tui.__main__":
        importlib.import_module(m.name)
import client.commands.tui, client.commands.watch
bad = sorted(m for m in sys.modules if m == "daemon" or m.startswith("daemon."))
print(",".join(bad))
"""


def test_tui_never_imports_the_daemon():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"tui imports daemon modules: {out.stdout.strip()}"
