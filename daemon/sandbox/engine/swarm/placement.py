"""Which swarm node a sandbox runs on: the ready node with the most CPU and memory left.

Swarm's own scheduler spreads tasks by how many each node runs, whatever they reserve, and places
each service on its own. svc pins every container of one sandbox (its agent, services and helpers)
to one node, chosen when the sandbox's first container is created: among the ready, active nodes
that have an engine URL (SERVICE_SWARM_NODES: the daemon execs there), the one whose free share,
min(free CPUs / CPUs, free memory / memory), is largest. Free is what the node offers less what
this daemon's containers reserve there (an agent its CPU and memory limits, a helper its memory, as
`SwarmDriver._create_service` reserves them). A node where a container was lost (`NodeLost`) is
passed over for LOST_AVOID_S while another can be chosen, so a retried run lands elsewhere.

Tasks the daemon did not make (another daemon's on the same swarm, or its own from before a restart)
count with what they reserve, as the manager lists them. A removed container's reservation is counted
until the manager lists its task no more (or ended), at most REMOVAL_LAG_S: the node holds it until it
has stopped the task, and a sandbox pinned to a node whose room is still taken would wait for it. The
warm pool fills only while some node has room for one more sandbox (`room_for`): pooled sandboxes
must not take the room the runs need.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

LOST_AVOID_S = 120.0
REMOVAL_LAG_S = 5.0
TASK_ENDED = {"complete", "shutdown", "failed", "rejected", "orphaned", "remove"}  # a task that holds nothing


@dataclass
class NodeShare:
    id: str
    name: str
    role: str
    state: str
    availability: str
    message: str
    nano_cpus: int
    memory: int
    reserved_cpus: int = 0
    reserved_memory: int = 0
    sandboxes: set[str] = field(default_factory=set)

    @property
    def usable(self) -> bool:
        return self.state == "ready" and self.availability == "active"

    def free_share(self) -> float:
        cpu = (self.nano_cpus - self.reserved_cpus) / self.nano_cpus if self.nano_cpus else 0.0
        memory = (self.memory - self.reserved_memory) / self.memory if self.memory else 0.0
        return min(cpu, memory)


class NodePlacement:
    """The nodes as last read from the manager, with this daemon's reservations on each."""

    def __init__(self, refresh_s: float) -> None:
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeShare] = {}  # node id -> share
        self._read_at = 0.0
        self._sandbox_node: dict[str, str] = {}  # sandbox id -> node id
        self._held: dict[str, tuple[str, int, int, str | None]] = {}  # service name -> (node id, nano cpus, memory, sandbox)
        self._lost: dict[str, float] = {}  # node hostname -> when a container there was lost
        # (counted until, node id, nano cpus, memory, its service ids): removed, its task maybe still running
        self._draining: list[tuple[float, str, int, int, frozenset[str]]] = []
        self._aliases: dict[str, str] = {}  # service id -> the key (service name) its reservation is held under
        self._draining_ids: dict[str, float] = {}  # removed services' ids -> until their hold drains

    def stale(self) -> bool:
        return time.monotonic() - self._read_at > self.refresh_s

    def update(self, nodes: list[dict[str, Any]], tasks: list[dict[str, Any]] | None = None) -> None:
        """The manager's `GET /nodes` answer (and `GET /tasks`: what other clients' tasks, or this
        daemon's from before a restart, still reserve on each node); this daemon's holds stay."""
        with self._lock:
            read: dict[str, NodeShare] = {}
            for node in nodes:
                resources = (node.get("Description") or {}).get("Resources") or {}
                status, spec = node.get("Status") or {}, node.get("Spec") or {}
                share = NodeShare(
                    id=node["ID"], name=(node.get("Description") or {}).get("Hostname") or node["ID"][:12],
                    role=spec.get("Role") or "worker", state=status.get("State") or "unknown",
                    availability=spec.get("Availability") or "active", message=status.get("Message") or "",
                    nano_cpus=int(resources.get("NanoCPUs") or 0), memory=int(resources.get("MemoryBytes") or 0))
                read[share.id] = share
            for node_id, cpus, memory, sandbox in self._held.values():
                if node_id in read:
                    read[node_id].reserved_cpus += cpus
                    read[node_id].reserved_memory += memory
                    if sandbox:
                        read[node_id].sandboxes.add(sandbox)
            if tasks is not None:  # a removed container whose task the manager no longer runs holds nothing
                running = {t.get("ServiceID") for t in tasks if (t.get("Status") or {}).get("State") not in TASK_ENDED}
                self._draining = [d for d in self._draining if d[4] & running]
            for _, node_id, cpus, memory, _ in self._draining:
                if node_id in read:
                    read[node_id].reserved_cpus += cpus
                    read[node_id].reserved_memory += memory
            now = time.monotonic()
            self._draining_ids = {i: until for i, until in self._draining_ids.items() if until > now}
            ours = set(self._aliases) | set(self._draining_ids)
            for task in tasks or []:
                holder = read.get(task.get("NodeID") or "")
                state = (task.get("Status") or {}).get("State")
                if holder is None or task.get("ServiceID") in ours or state in TASK_ENDED:
                    continue
                wanted = ((task.get("Spec") or {}).get("Resources") or {}).get("Reservations") or {}
                holder.reserved_cpus += int(wanted.get("NanoCPUs") or 0)
                holder.reserved_memory += int(wanted.get("MemoryBytes") or 0)
            self._nodes = read
            self._read_at = time.monotonic()

    def reserve(self, key: str, sandbox_id: str | None, nano_cpus: int, memory: int, reachable: set[str],
                force: bool = False) -> tuple[NodeShare | None, bool]:
        """Choose the node for a container (`key`: its service name) and hold its reservation there at
        once, so containers placed at the same moment see each other: its sandbox's node once it has
        one, else the candidate with room for it and the largest free share. (node, True) when held;
        (the best node, False) when none has room, nothing held, unless `force` (holds it there: Swarm
        waits or fails naming why); (None, True) when no node is known (Swarm decides)."""
        with self._lock:
            self._expire()
            node = self._nodes.get(self._sandbox_node.get(sandbox_id or "", ""))
            if node is None:
                candidates = self._candidates(reachable)
                if not candidates:
                    return None, True
                fitting = [n for n in candidates if n.nano_cpus - n.reserved_cpus >= nano_cpus
                           and n.memory - n.reserved_memory >= memory]
                node = max(fitting or candidates, key=lambda n: (n.free_share(), -len(n.sandboxes), n.name))
                if not fitting and not force:
                    return node, False
                if sandbox_id:
                    self._sandbox_node[sandbox_id] = node.id
            self._held[key] = (node.id, nano_cpus, memory, sandbox_id)
            node.reserved_cpus += nano_cpus
            node.reserved_memory += memory
            if sandbox_id:
                node.sandboxes.add(sandbox_id)
            return node, True

    def fits_anywhere(self, nano_cpus: int, memory: int, reachable: set[str]) -> bool:
        """Whether an empty candidate could hold it at all (else waiting for room is pointless)."""
        with self._lock:
            return any(n.nano_cpus >= nano_cpus and n.memory >= memory for n in self._candidates(reachable))

    def alias(self, service_id: str, key: str) -> None:
        """The service made for `key` has this id (removals name either)."""
        with self._lock:
            self._aliases[service_id] = key

    def room_for(self, nano_cpus: int, memory: int, reachable: set[str]) -> bool:
        """Whether a node that would be chosen has room for a sandbox reserving this much (yes while
        the nodes were never read: Swarm then decides)."""
        with self._lock:
            if not self._read_at:
                return True
            self._expire()
            return any(n.nano_cpus - n.reserved_cpus >= nano_cpus and n.memory - n.reserved_memory >= memory
                       for n in self._candidates(reachable))

    def _candidates(self, reachable: set[str]) -> list[NodeShare]:
        now = time.monotonic()
        usable = [n for n in self._nodes.values() if n.usable and n.name in reachable]
        healthy = [n for n in usable if now - self._lost.get(n.name, -LOST_AVOID_S) >= LOST_AVOID_S]
        return healthy or usable

    def _expire(self) -> None:
        now = time.monotonic()
        while self._draining and self._draining[0][0] <= now:
            _, node_id, cpus, memory, _ = self._draining.pop(0)
            node = self._nodes.get(node_id)
            if node is not None:
                node.reserved_cpus -= cpus
                node.reserved_memory -= memory

    def release(self, service: str) -> None:
        """A container's service (by name or id) is removed: its reservation drains (REMOVAL_LAG_S)."""
        with self._lock:
            key = self._aliases.get(service, service)
            until = time.monotonic() + REMOVAL_LAG_S
            service_ids = frozenset(i for i, k in self._aliases.items() if k == key)
            for service_id in service_ids:
                del self._aliases[service_id]
                self._draining_ids[service_id] = until  # its lingering task is the draining hold, not another's
            held = self._held.pop(key, None)
            if held is None:
                return
            node_id, cpus, memory, sandbox = held
            self._draining.append((until, node_id, cpus, memory, service_ids))  # still counted
            node = self._nodes.get(node_id)
            if node is not None and sandbox and not any(h[3] == sandbox for h in self._held.values()):
                node.sandboxes.discard(sandbox)

    def forget(self, sandbox_id: str) -> None:
        """The sandbox is being torn down: its next container (none) needs no node."""
        with self._lock:
            self._sandbox_node.pop(sandbox_id, None)

    def lost(self, node_name: str) -> None:
        with self._lock:
            self._lost[node_name] = time.monotonic()

    def shares(self) -> list[NodeShare]:
        with self._lock:
            self._expire()
            return sorted(self._nodes.values(), key=lambda n: n.name)
