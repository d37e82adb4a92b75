"""The swarm placement's bookkeeping (daemon/sandbox/engine/swarm/placement.py) on node lists shaped
like the manager's `GET /nodes`: what the real two-node swarm cannot stage on demand (simultaneous
reservations, a removal still draining, a full cluster). Placement on the real swarm:
tests/swarm/test_placement.py."""
from __future__ import annotations

import pytest

from daemon.sandbox.engine.swarm import placement as placement_module
from daemon.sandbox.engine.swarm.placement import NodePlacement

CPU = 10**9
GIB = 1024**3


def node(node_id: str, name: str, cpus: int = 2, state: str = "ready", availability: str = "active") -> dict:
    return {"ID": node_id, "Description": {"Hostname": name, "Resources": {"NanoCPUs": cpus * CPU, "MemoryBytes": 8 * GIB}},
            "Status": {"State": state}, "Spec": {"Role": "worker", "Availability": availability}}


@pytest.fixture
def placement() -> NodePlacement:
    instance = NodePlacement(refresh_s=60)
    instance.update([node("n1", "one"), node("n2", "two")])
    return instance


REACHABLE = {"one", "two"}


def test_sandboxes_placed_at_the_same_moment_see_each_others_reservation(placement):
    first, _ = placement.reserve("a-agent", "a", 2 * CPU, GIB, REACHABLE)
    second, _ = placement.reserve("b-agent", "b", 2 * CPU, GIB, REACHABLE)
    assert {first.name, second.name} == {"one", "two"}


def test_a_sandboxs_later_containers_follow_its_agent(placement):
    agent, _ = placement.reserve("a-agent", "a", CPU, GIB, REACHABLE)
    placement.reserve("b-agent", "b", CPU // 2, GIB, REACHABLE)  # the other node now has more left
    service, _ = placement.reserve("a-db", "a", 0, GIB, REACHABLE)
    assert service.name == agent.name


def test_no_room_holds_nothing_unless_forced(placement):
    placement.reserve("a-agent", "a", 2 * CPU, GIB, REACHABLE)
    placement.reserve("b-agent", "b", 2 * CPU, GIB, REACHABLE)
    waiting = placement.reserve("c-agent", "c", CPU, GIB, REACHABLE)
    forced = placement.reserve("c-agent", "c", CPU, GIB, REACHABLE, force=True)
    assert (waiting[1], forced[1], placement.room_for(CPU, GIB, REACHABLE)) == (False, True, False)


def test_a_removed_containers_room_comes_back_only_after_the_removal_lag(placement, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(placement_module.time, "monotonic", lambda: now[0])
    placement.reserve("a-agent", "a", 2 * CPU, GIB, REACHABLE)
    placement.reserve("b-agent", "b", 2 * CPU, GIB, REACHABLE)
    placement.release("a-agent")
    during = placement.room_for(CPU, GIB, REACHABLE)
    now[0] += placement_module.REMOVAL_LAG_S + 0.1
    assert (during, placement.room_for(CPU, GIB, REACHABLE)) == (False, True)


def test_a_removed_containers_room_comes_back_once_the_manager_lists_its_task_no_more(placement):
    placement.reserve("a-agent", "a", 2 * CPU, GIB, REACHABLE)
    placement.reserve("b-agent", "b", 2 * CPU, GIB, REACHABLE)
    placement.alias("svc-a", "a-agent")
    placement.alias("svc-b", "b-agent")
    placement.release("a-agent")
    still_running = [{"ServiceID": "svc-a", "NodeID": "n1", "Status": {"State": "running"}}]
    placement.update([node("n1", "one"), node("n2", "two")], still_running)
    while_its_task_runs = placement.room_for(CPU, GIB, REACHABLE)
    placement.update([node("n1", "one"), node("n2", "two")], [])
    assert (while_its_task_runs, placement.room_for(CPU, GIB, REACHABLE)) == (False, True)


def test_a_node_where_a_container_was_lost_is_passed_over(placement):
    placement.lost("one")
    chosen = [placement.reserve(f"s{i}-agent", f"s{i}", CPU // 4, GIB, REACHABLE)[0].name for i in range(3)]
    assert chosen == ["two", "two", "two"]


def test_drained_down_and_unreachable_nodes_get_nothing():
    placement = NodePlacement(refresh_s=60)
    placement.update([node("n1", "one", availability="drain"), node("n2", "two", state="down"), node("n3", "three"),
                      node("n4", "four")])
    chosen = {placement.reserve(f"s{i}-agent", f"s{i}", CPU // 4, GIB, {"one", "two", "three"})[0].name for i in range(4)}
    assert chosen == {"three"}


def task(service_id: str, node_id: str, cpus: float, state: str = "running") -> dict:
    return {"ServiceID": service_id, "NodeID": node_id, "Status": {"State": state},
            "Spec": {"Resources": {"Reservations": {"NanoCPUs": int(cpus * CPU), "MemoryBytes": GIB}}}}


def test_what_other_clients_tasks_hold_counts_and_this_daemons_own_tasks_count_once():
    placement = NodePlacement(refresh_s=60)
    placement.update([node("n1", "one"), node("n2", "two")])
    mine, _ = placement.reserve("a-agent", "a", CPU, GIB, REACHABLE)
    placement.alias("svc-a", "a-agent")
    other = "n2" if mine.id == "n1" else "n1"
    placement.update([node("n1", "one"), node("n2", "two")],
                     [task("svc-a", mine.id, 1), task("svc-foreign", other, 2), task("svc-gone", other, 2, "shutdown")])
    shares = {n.id: n.reserved_cpus / CPU for n in placement.shares()}
    assert (shares[mine.id], shares[other], placement.reserve("b-agent", "b", CPU, GIB, REACHABLE)[0].id) == (1, 2, mine.id)
