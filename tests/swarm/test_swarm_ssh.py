"""ssh:// engines (daemon/sandbox/engine/swarm/ssh_tunnel.py): the same local swarm reached only over ssh,
with the cluster's ssh_config (its key, its known hosts; `make swarm-up` writes
.svc-home/swarm-ssh.env). A sandbox runs on each node through the tunnels; an unknown host key or a
key the node does not accept is refused, naming the engine and ssh's reason; the user's own ~/.ssh
is neither read nor written."""
from __future__ import annotations

import dataclasses
import os
import re
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from daemon.sandbox.engine import RuntimeUnavailable
from daemon.sandbox.engine.swarm.driver import SwarmDriver
from daemon.sandbox.engine.swarm.settings import from_env, read_env_file
from tests.support.swarm import PYTHON, ROOT, service_spec

SSH_ENV = ROOT / ".svc-home" / "swarm-ssh.env"


@pytest.fixture
def over_ssh(swarm):
    settings = from_env(read_env_file(SSH_ENV.read_text()))
    assert all(url.startswith("ssh://") for url in [settings.manager, *settings.nodes.values()])
    return settings


@pytest_asyncio.fixture
async def ssh_driver(over_ssh):
    driver = SwarmDriver(over_ssh, place_timeout_s=5.0)
    yield driver
    await driver.close()


async def test_a_sandbox_runs_on_each_node_through_ssh(over_ssh, ssh_driver, labels):
    net = f"svct-{uuid.uuid4().hex[:8]}-net"
    await ssh_driver.create_network(net, labels, internal=True)
    for node in over_ssh.nodes:
        agent = await ssh_driver.run_container(service_spec(f"svct-{uuid.uuid4().hex[:8]}-agent", PYTHON, net, labels,
                                                            node=node, command=["sleep", "infinity"]))
        await ssh_driver.put_file(agent.id, "/tmp/hello.txt", node.encode())
        result = await ssh_driver.exec(agent.id, ["sh", "-c", "cat /tmp/hello.txt; hostname >/dev/null"], watchdog_s=30)
        assert (ssh_driver.node_of(agent.id), result.stdout.decode()) == (node, node), (
            result.exit_code, result.stderr, result.stream_broken)  # seen once in CI: an empty stdout


async def ping_refusal(settings, tmp_path, replace: str, by: str) -> str:
    """What a driver whose ssh_config has `replace` swapped for `by` is told when it pings the manager."""
    config = tmp_path / "ssh_config"
    config.write_text(Path(settings.ssh_config).read_text().replace(replace, by))
    driver = SwarmDriver(dataclasses.replace(settings, ssh_config=str(config)))
    try:
        with pytest.raises(RuntimeUnavailable) as refused:
            await driver.ping()
        return str(refused.value)
    finally:
        await driver.close()


async def test_an_unknown_host_key_is_refused_naming_the_engine(over_ssh, tmp_path):
    (tmp_path / "known_hosts").write_text("")
    message = await ping_refusal(over_ssh, tmp_path, str(Path(over_ssh.ssh_config).with_name("known_hosts")),
                                 str(tmp_path / "known_hosts"))
    assert re.search(rf"ssh to {over_ssh.manager} failed: .*[Hh]ost key verification failed", message), message


async def test_a_key_the_node_does_not_accept_is_refused(over_ssh, tmp_path):
    other_key = tmp_path / "other"
    assert os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other_key}") == 0
    message = await ping_refusal(over_ssh, tmp_path, str(Path(over_ssh.ssh_config).with_name("client")), str(other_key))
    assert re.search(rf"ssh to {over_ssh.manager} failed: .*Permission denied", message), message


async def test_the_users_own_ssh_directory_is_not_touched(over_ssh, ssh_driver, monkeypatch):
    """ssh takes the passwd user's home, not $HOME: the cluster's ssh_config carries everything, and
    nothing (known_hosts, keys) is written to the user's ~/.ssh."""
    home_ssh = Path(os.path.expanduser("~" + os.environ.get("USER", "root"))) / ".ssh"
    before = sorted(p.name for p in home_ssh.iterdir()) if home_ssh.is_dir() else None
    stamp = {p.name: p.stat().st_mtime_ns for p in home_ssh.iterdir()} if home_ssh.is_dir() else {}
    await ssh_driver.ping()
    after = sorted(p.name for p in home_ssh.iterdir()) if home_ssh.is_dir() else None
    assert (after, {p.name: p.stat().st_mtime_ns for p in home_ssh.iterdir()} if home_ssh.is_dir() else {}) == (before, stamp)
