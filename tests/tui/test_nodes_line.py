"""The sandboxes screen's line of nodes on a swarm (tui/screens/sandboxes.nodes_line): each node's
state when it is not ready, CPUs, what its live sandboxes reserve and the memory left."""
from __future__ import annotations

from daemon.contract.sandboxes import NodeList
from tui.screens.sandboxes import nodes_line

GIB = 1024**3


def node(name: str, state: str = "ready", reachable: bool = True, sandboxes: int = 0) -> dict:
    return {"name": name, "role": "worker", "state": state, "availability": "active", "message": None,
            "reachable": reachable, "cpus": 2.0, "memory_bytes": 8 * GIB, "reserved_cpus": float(sandboxes),
            "reserved_memory_bytes": sandboxes * GIB, "live_sandboxes": sandboxes, "sandboxes": []}


def test_the_line_names_each_node_and_what_is_placed_there():
    nodes = NodeList(runtime="swarm", nodes=[node("n1", sandboxes=1), node("n2", state="down", reachable=False)])
    assert nodes_line(nodes) == ("swarm · n1: 2 CPUs, 1 reserved, 7.0G memory free, 1 sandbox  │  "
                                 "n2 down/active (no engine URL): 2 CPUs, 0 reserved, 8.0G memory free, 0 sandboxes")
