"""A host workspace bound into a container on another node stays what the daemon reads: host edits
reach the container before a command, the command's changes come back after it."""
from __future__ import annotations

import os
import socket
import uuid

from tests.support.swarm import PYTHON, service_spec


async def _agent(driver, labels, workspace):
    node = list(driver.settings.nodes)[-1]
    spec = service_spec(f"svct-{uuid.uuid4().hex[:8]}-agent", PYTHON, None, labels, node=node,
                        command=["sleep", "infinity"], working_dir="/workspace",
                        binds={str(workspace): ("/workspace", "rw")})
    return await driver.run_container(spec)


async def test_host_file_is_in_the_container(driver, labels, tmp_path):
    (tmp_path / "task.txt").write_text("fix the bug\n")
    agent = await _agent(driver, labels, tmp_path)
    result = await driver.exec(agent.id, ["cat", "/workspace/task.txt"], watchdog_s=10)
    assert result.stdout == b"fix the bug\n"


async def test_file_written_by_a_command_is_on_the_host(driver, labels, tmp_path):
    agent = await _agent(driver, labels, tmp_path)
    await driver.exec(agent.id, ["sh", "-c", "mkdir -p src && echo done > src/out.txt"], watchdog_s=10)
    assert (tmp_path / "src" / "out.txt").read_text() == "done\n"


async def test_file_deleted_by_a_command_is_gone_from_the_host(driver, labels, tmp_path):
    (tmp_path / "old.txt").write_text("x")
    agent = await _agent(driver, labels, tmp_path)
    await driver.exec(agent.id, ["rm", "/workspace/old.txt"], watchdog_s=10)
    assert not (tmp_path / "old.txt").exists()


async def test_host_edit_between_commands_reaches_the_container(driver, labels, tmp_path):
    agent = await _agent(driver, labels, tmp_path)
    await driver.exec(agent.id, ["true"], watchdog_s=10)
    (tmp_path / "later.txt").write_text("added by the files API\n")
    result = await driver.exec(agent.id, ["cat", "/workspace/later.txt"], watchdog_s=10)
    assert result.stdout == b"added by the files API\n"


async def test_link_out_of_the_workspace_never_reaches_the_host(driver, labels, tmp_path):
    agent = await _agent(driver, labels, tmp_path)
    await driver.exec(agent.id, ["ln", "-s", "/etc/passwd", "/workspace/passwd"], watchdog_s=10)
    assert not os.path.lexists(tmp_path / "passwd")


async def test_daemon_written_audit_copy_is_not_overwritten_by_the_container(driver, labels, tmp_path):
    (tmp_path / ".svc").mkdir()
    agent = await _agent(driver, labels, tmp_path)
    await driver.exec(agent.id, ["sh", "-c", "echo forged > /workspace/.svc/audit.jsonl"], watchdog_s=10)
    assert not (tmp_path / ".svc" / "audit.jsonl").exists()


async def test_file_a_command_left_alone_is_not_rewritten_on_the_host(driver, labels, tmp_path):
    (tmp_path / "keep.txt").write_text("same\n")
    agent = await _agent(driver, labels, tmp_path)
    before = (tmp_path / "keep.txt").stat().st_mtime_ns  # a rewrite from the tar would set whole seconds
    await driver.exec(agent.id, ["sh", "-c", "echo other > other.txt"], watchdog_s=10)
    assert (tmp_path / "keep.txt").stat().st_mtime_ns == before


async def test_command_runs_in_a_container_bound_to_a_host_socket(driver, labels, tmp_path):
    """The daemon's sandbox socket (in-agent traces) is bound into every agent by a real svcd; a
    socket cannot reach another node, and commands there still run."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "svcd.sock"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    node = list(driver.settings.nodes)[-1]
    spec = service_spec(f"svct-{uuid.uuid4().hex[:8]}-agent", PYTHON, None, labels, node=node,
                        command=["sleep", "infinity"], working_dir="/workspace",
                        binds={str(workspace): ("/workspace", "rw"), str(tmp_path / "svcd.sock"): ("/run/svc/svcd.sock", "rw")})
    try:
        agent = await driver.run_container(spec)
        result = await driver.exec(agent.id, ["sh", "-c", "echo ran > done.txt"], watchdog_s=10)
        assert (result.exit_code, (workspace / "done.txt").read_text()) == (0, "ran\n")
    finally:
        listener.close()
