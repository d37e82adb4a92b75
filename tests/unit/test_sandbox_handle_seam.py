"""The seams between a run and its sandbox, without Docker: the runner, the checks, the teardown
exports and image agents reach a sandbox only through its handle (daemon/sandbox/handle.py), the
recording handle forwards nothing implicitly, the pool gets the live sandboxes as a registry, and a
boot's result is read from the booting sandbox itself (no event stream, no row)."""
from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from daemon.runner.state import RecordingSandbox
from daemon.sandbox.handle import Booting, SandboxParts
from daemon.sandbox.models import BootFailure, Limits
from daemon.sandbox.runtime import SandboxRuntime

ROOT = Path(__file__).resolve().parents[2]
HANDLE_USERS = [ROOT / "daemon/runner" / name for name in ("phases.py", "agent.py", "exports.py", "scenario.py", "state.py")]
HANDLE_USERS += sorted((ROOT / "daemon/scoring/checks").glob("*.py"))
# what only the manager and its parts may touch: the engine, the host workspace, the raw SDK, the
# in-memory records by id, the lifecycle stream
BEHIND_THE_HANDLE = {"driver", "workspaces", "api", "audit_log", "secret_values", "service_plan", "mock_requests",
                     "stop_agent_leftovers", "workspace_path", "subscribe"}


def test_runs_checks_and_exports_use_only_the_sandbox_handle():
    found = []
    for path in HANDLE_USERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in BEHIND_THE_HANDLE:
                owner = ast.unparse(node.value)
                if "manager" in owner or owner in ("driver", "s.events"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {owner}.{node.attr}")
    assert found == []


def test_the_recording_handle_forwards_nothing_implicitly_and_has_a_phase():
    assert "__getattr__" not in vars(RecordingSandbox)
    assert "phase" in RecordingSandbox.__init__.__code__.co_varnames


def test_the_pool_reads_no_manager():
    source = (ROOT / "daemon/sandbox/pool.py").read_text()
    assert "manager." not in source and "_live" not in source


def runtime(tmp_path: Path) -> SandboxRuntime:
    return SandboxRuntime(id="sb-1", tenant_id="t", shape="B", seed="s", image="img", plans=[], limits=Limits(),
                          workspace=tmp_path / "w", runtime_dir=tmp_path / "r", created=0.0, expires=0.0)


def test_a_failed_boot_answers_its_step_and_message_from_the_booting_sandbox(tmp_path):
    async def scenario():
        sb = runtime(tmp_path)

        async def failing_boot() -> None:  # what the manager's boot task does on a BootFailure
            sb.state, sb.boot_failure = "error", BootFailure("setup", "exited with 7")

        sb.boot_task = asyncio.get_running_loop().create_task(failing_boot())
        return await Booting(sb, SandboxParts(None, None, None, None, None)).result()  # type: ignore[arg-type]

    result = asyncio.run(scenario())
    assert (result.state, result.step, result.message, result.sandbox) == ("error", "setup", "exited with 7", None)
