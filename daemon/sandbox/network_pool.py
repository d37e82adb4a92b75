"""Sandbox networks kept for the next sandbox instead of removed (issue 41: creating and removing
an internal bridge network is a third of what a trivial scenario costs the engine).

A pooled network belongs to one sandbox at a time. It is created `internal` and firewalled off from
the host (firewall.py) once, with labels of its own (`svc.daemon`, `svc.sandbox=<its name>`, no
tenant), and keeps its firewall rules while it waits. When its sandbox is torn down, every container
of the sandbox is removed first; the network goes back to the pool only when the engine lists no
endpoint on it, and only up to `SERVICE_NETWORK_POOL` idle networks (default 4; 0 turns pooling off),
otherwise it is removed with its rules. What isolation this keeps: a network is never shared by two
sandboxes at once, nothing of the last sandbox is attached when the next one joins (no container,
no DNS name: the engine's names go with their endpoints), and the host firewall rules never lapse.
What the next sandbox can see of the last one: nothing but the addresses the engine hands out again.

Networks of `determinism.dns: static` (a subnet from the seed) and a swarm's overlays are not pooled.
The periodic sweep spares pooled networks (`names`); a restart reaps them with everything else of the
daemon; a clean stop removes them. `svc doctor --fix` run from another home counts an idle daemon's
networks as leftovers (none of its containers runs): a network is checked again when it is taken
(still there, still empty), so its removal costs a new network, not a failed boot.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.sandbox.engine import SandboxDriver
    from daemon.sandbox.firewall import SandboxFirewall

log = logging.getLogger("svcd.sandbox.network_pool")

PREFIX = "svc-net-"


class NetworkPool:
    def __init__(self, driver: SandboxDriver, firewall: SandboxFirewall, daemon_id: str, size: int):
        self.driver = driver
        self.firewall = firewall
        self.daemon_id = daemon_id
        self.size = size if driver.runtime == "docker" else 0
        self.idle: list[str] = []
        self.in_use: set[str] = set()
        self.reused = 0
        self.created = 0

    @property
    def enabled(self) -> bool:
        return self.size > 0

    def names(self) -> set[str]:
        """Every network of the pool, idle or in use: the `svc.sandbox` labels the sweep spares."""
        return set(self.idle) | self.in_use

    async def take(self) -> str:
        """An idle network, else a new one (internal, firewalled). The caller's sandbox owns it
        until `give_back`. Raises what creating or firewalling it raised (nothing is left over)."""
        while self.idle:
            name = self.idle.pop()
            self.in_use.add(name)
            try:  # still there (`svc doctor --fix` of another home may have removed it) and empty
                empty = await self.driver.network_endpoints(name) == 0
            except Exception:  # noqa: BLE001 - gone or unreadable: not reused
                empty = False
            if empty:
                self.reused += 1
                return name
            await self._remove(name)
        name = f"{PREFIX}{uuid.uuid4().hex[:16]}"
        labels = {"svc.daemon": self.daemon_id, "svc.sandbox": name, "svc.role": "network", "svc.network_pool": "1"}
        self.in_use.add(name)  # before the engine has it: the sweep must not take it meanwhile
        try:
            await self.driver.create_network(name, labels, internal=True)
            if self.firewall.enabled:
                bridge = await self.driver.network_bridge(name)
                await self.firewall.protect(bridge, name, self.daemon_id)
        except BaseException:
            await self._remove(name)
            raise
        self.created += 1
        return name

    async def give_back(self, name: str) -> None:
        """After every container of its sandbox was removed: kept for the next sandbox when nothing
        is attached and the pool has room, removed otherwise."""
        if name not in self.in_use:
            return
        keep = len(self.idle) < self.size
        if keep:
            try:
                keep = await self.driver.network_endpoints(name) == 0
            except Exception as exc:  # noqa: BLE001 - cannot tell: not reused
                log.warning("cannot list the endpoints of network %s: %s", name, exc)
                keep = False
        if keep:
            self.in_use.discard(name)
            self.idle.append(name)
        else:
            await self._remove(name)

    async def _remove(self, name: str) -> None:
        self.in_use.discard(name)
        try:
            await self.driver.remove_network(name)
        except Exception as exc:  # noqa: BLE001 - the sweep removes it later
            log.warning("removing pooled network %s failed: %s", name, exc)
        if self.firewall.enabled:
            try:
                await self.firewall.release(name)
            except Exception as exc:  # noqa: BLE001 - the next start reaps rules of gone bridges
                log.warning("removing the host firewall rules of network %s failed: %s", name, exc)

    async def close(self) -> None:
        """Remove the idle networks (a clean stop)."""
        idle, self.idle = self.idle, []
        for name in idle:
            self.in_use.add(name)
            await self._remove(name)
