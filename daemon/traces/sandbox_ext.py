"""Trace routing inside sandboxes: a boot extension (daemon.sandbox.boot.BootExtension) that lets
an agent process reach the daemon's trace endpoint.

The agent container gets
- the daemon's sandbox socket bind-mounted at /run/svc/svcd.sock and `SERVICE_BASE_URL` pointing at
  it; that socket accepts only sandbox tokens (even with auth disabled), and the token in
  `SERVICE_SANDBOX_TOKEN` may only post its own sandbox's trace and read that sandbox; the sandbox
  network itself stays `internal`; on a swarm node, where that socket does not reach, a drop
  directory at /run/svc/traces instead (`SERVICE_BASE_URL=file:///run/svc/traces`), brought back
  after every command and once a second from the moment the sandbox is bound (`on_services`) to its
  teardown, and ingested as it arrives (daemon/traces/drop.py);
- the single-file tracing SDK at /opt/svc/python/svc_tracing.py, on `PYTHONPATH`, so
  `import svc_tracing` (or `from svc_tracing import trace, wrap_openai`) works with nothing installed.

Registered on the sandbox manager at startup by daemon.api.traces. `SERVICE_SANDBOX_TRACING=0`
turns it off.
"""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from daemon.sandbox.boot import BootExtension
from daemon.appkeys import SANDBOXES, SETTINGS
from daemon.traces import drop
from daemon.traces.drop import DIR_IN_SANDBOX, drop_dir

log = logging.getLogger("svcd.traces")

SOCKET_IN_SANDBOX = "/run/svc/svcd.sock"
SDK_DIR_IN_SANDBOX = "/opt/svc/python"
SDK_FILE = Path(__file__).resolve().parents[2] / "client" / "tracing" / "sdk.py"
WIRE_FILE = Path(__file__).resolve().parents[1] / "sandbox" / "programs" / "provider_wire.py"  # the SDK imports it


FOLLOWER = "trace_drop_follower"  # sb.extension_state: the task following a swarm sandbox's drop


class TraceRoutingExtension(BootExtension):
    def __init__(self, socket_path: Path | None, app: Any = None):
        self.socket_path = socket_path
        self.app = app

    async def on_network(self, manager: Any, sb: Any, agent: Any) -> None:
        if SDK_FILE.is_file():
            agent.binds[str(SDK_FILE)] = (f"{SDK_DIR_IN_SANDBOX}/svc_tracing.py", "ro")
            agent.binds[str(WIRE_FILE)] = (f"{SDK_DIR_IN_SANDBOX}/provider_wire.py", "ro")
            existing = agent.env.get("PYTHONPATH")
            agent.env["PYTHONPATH"] = SDK_DIR_IN_SANDBOX + (f":{existing}" if existing else "")
        socket = self.socket_path
        if getattr(manager.driver, "runtime", "docker") == "swarm":
            # no socket reaches a node: the SDK writes to a drop directory mirrored back here (drop.py)
            directory = drop_dir(sb)
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o777)  # the agent may run as any user of its image
            agent.binds[str(directory)] = (DIR_IN_SANDBOX, "rw")
            agent.outputs.append(DIR_IN_SANDBOX)
            agent.env.setdefault("SERVICE_BASE_URL", f"file://{DIR_IN_SANDBOX}")
        elif socket is not None and socket.exists():
            agent.binds[str(socket)] = (SOCKET_IN_SANDBOX, "rw")
            agent.env.setdefault("SERVICE_BASE_URL", f"unix://{SOCKET_IN_SANDBOX}")
        else:
            log.info("sandbox %s: the daemon socket %s is not there; its agent cannot send traces", sb.id, socket)

    async def on_services(self, manager: Any, sb: Any) -> None:
        """Bound to a run or a caller (a pooled sandbox: claimed): its drop is followed live."""
        if self.app is not None and drop_dir(sb).is_dir() and FOLLOWER not in sb.extension_state:
            sb.extension_state[FOLLOWER] = manager.tasks.spawn(drop.follow(self.app, manager.driver, sb))

    async def on_destroy(self, manager: Any, sb: Any) -> None:
        """The last of the drop (a command's background process may have written after it) is stored
        before the containers go; a run's sandbox needs none (the runner stored the drop after its
        agent, having stopped whatever the agent left running)."""
        follower = sb.extension_state.pop(FOLLOWER, None)
        if follower is None:
            return
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        if sb.metadata.get("run_id"):
            return
        try:
            if sb.agent is not None:
                await manager.driver.collect(sb.agent.id, cap=drop.LIVE_CAP)
        except Exception as exc:  # noqa: BLE001 - what came back after the last command stands
            log.info("sandbox %s: the last of its trace drop did not come back: %s", sb.id, exc)
        try:
            await drop.ingest(self.app, sb)
        except Exception:  # noqa: BLE001 - traces never fail a teardown
            log.exception("ingesting the last dropped traces of %s failed", sb.id)


async def register(app: Any) -> None:
    """on_startup hook: add the extension to the sandbox manager, when there is one."""
    if os.environ.get("SERVICE_SANDBOX_TRACING", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    manager = app.get(SANDBOXES)
    extensions = getattr(manager, "extensions", None)
    if isinstance(extensions, list) and not any(isinstance(e, TraceRoutingExtension) for e in extensions):
        extensions.append(TraceRoutingExtension(app[SETTINGS].sandbox_socket_path, app))
