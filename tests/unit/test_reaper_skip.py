"""When the reaper's exec may be skipped (daemon/sandbox/commands.nothing_left): only for the plain
keep-alive under docker-init with nothing but those two processes on the host's count."""
from __future__ import annotations

from pathlib import Path

from daemon.sandbox import toolset
from daemon.sandbox.commands import nothing_left
from daemon.sandbox.engine import ContainerSpec
from daemon.sandbox.models import Limits
from daemon.sandbox.runtime import SandboxRuntime


def sandbox(entrypoint: list[str] | None) -> SandboxRuntime:
    sb = SandboxRuntime(id="sb-x", tenant_id="t", shape="B", seed="s", image="img", plans=[], limits=Limits(),
                        workspace=Path("/nonexistent"), runtime_dir=Path("/nonexistent"), created=0.0, expires=0.0)
    sb.agent_spec = ContainerSpec(name="a", image="img", entrypoint=entrypoint, init=True)
    return sb


def test_the_reaper_is_skipped_only_for_the_plain_keep_alive_with_exactly_two_processes():
    plain, own = sandbox(toolset.KEEP_ALIVE), sandbox(None)
    assert [nothing_left(plain, 2), nothing_left(plain, 3), nothing_left(plain, 1), nothing_left(plain, 0),
            nothing_left(plain, None), nothing_left(own, 2)] == [True, False, False, False, False, False]
