"""The tutorial a newcomer follows first (docs/tutorials/evaluate-your-agent.md) runs as written: its
`sh` blocks, in order, as one bash script in an empty directory, with the installed `svc` on PATH and
a daemon of its own (started by the first command that needs it, as for a user), against the real
Docker engine. The page's own commands say what they expect (`|| echo "regression caught"`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.homes import short_home

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorials" / "evaluate-your-agent.md"
# What the page says happens: the candidate's regression is caught, and its reproducer runs the
# failing scenario again and sees the same check fail (not, say, a usage error).
EXPECTED_STDOUT = ("regression caught", "failed again, as it should")
EXPECTED_STDERR = ("FAIL correct",)


def tutorial_script() -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", TUTORIAL.read_text(), re.S | re.M)
    return "set -euo pipefail\n" + "\n".join(blocks)


def test_the_evaluate_your_agent_tutorial_runs_as_written(tmp_path):
    home = short_home("svc-doc-")  # the daemon's socket lives in it: AF_UNIX paths are short
    bindir = Path(sys.executable).parent  # the installed svc, as a user has it
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}", SERVICE_HOME=str(home),
               SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0", SERVICE_NO_AUTO_UPDATE="1",
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    work = tmp_path / "work"
    work.mkdir()
    try:
        done = subprocess.run(["bash", "-c", tutorial_script()], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    finally:
        subprocess.run([str(bindir / "svc"), "daemon", "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
    assert (done.returncode == 0 and all(line in done.stdout for line in EXPECTED_STDOUT)
            and all(line in done.stderr for line in EXPECTED_STDERR)), (
        f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
