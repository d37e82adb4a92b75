"""docs/how-to/what-your-agent-sees.md names every variable the daemon hands the agent: the task's
(daemon/runner/scenario.py), the sandbox's (daemon/sandbox/boot.py), the model gateway's
(daemon/sandbox/model_gateway.py) and the egress proxy's; read from the code, so a new one fails here
until the page says what it is."""
from __future__ import annotations

import re
from pathlib import Path

from daemon.sandbox.model_gateway import agent_env
from daemon.sandbox.network import proxy_env

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "what-your-agent-sees.md"


def names_set_in(path: Path, pattern: str) -> set[str]:
    return set(re.findall(pattern, (ROOT / path).read_text()))


def test_the_page_names_every_variable_the_agent_gets():
    page = PAGE.read_text()
    task = names_set_in(Path("daemon/runner/scenario.py"), r'"(SERVICE_[A-Z_]+)": |task_env\["(SERVICE_[A-Z_]+)"\]')
    task = {n for pair in task for n in (pair if isinstance(pair, tuple) else (pair,)) if n}
    sandbox = names_set_in(Path("daemon/sandbox/boot.py"), r'env\["(SERVICE_[A-Z_]+)"\]|"(SERVICE_SANDBOX_TOKEN)"')
    sandbox = {n for pair in sandbox for n in pair if n}
    expected = task | sandbox | set(agent_env("t")) | {k for k in proxy_env([], [], True) if k.isupper()}
    assert {"SERVICE_TASK_PROMPT", "SERVICE_SEED", "SERVICE_TASK_FILE", "SERVICE_SANDBOX_ID", "OPENAI_BASE_URL"} <= expected
    missing = sorted(n for n in expected if f"`{n}`" not in page)
    assert not missing, f"set for the agent but not on {PAGE.name}: {missing}"
    assert "`/workspace/.svc/task.json`" in page and "SERVICE_SERVICE_<NAME>_HOST" in page
