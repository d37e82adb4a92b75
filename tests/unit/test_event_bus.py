"""The stream bus keeps closed topics' histories for late subscribers only within its bounds, and
leaves nothing behind for a topic once it is gone."""
from __future__ import annotations

from daemon.events import EventBus


async def replay(bus: EventBus, topic: str) -> list:
    return [event async for event in bus.subscribe(topic)]


async def test_a_late_subscriber_replays_a_recently_closed_topic():
    bus = EventBus()
    bus.publish("run:a", {"type": "step"})
    bus.publish("run:a", {"type": "done"})
    bus.close("run:a")
    assert await replay(bus, "run:a") == [{"type": "step"}, {"type": "done"}]


async def test_the_oldest_closed_topics_are_dropped_past_the_topic_bound():
    bus = EventBus(retain_topics=3)
    for i in range(5):
        bus.publish(f"run:{i}", {"type": "done", "i": i})
        bus.close(f"run:{i}")
    assert sorted(bus.history) == ["run:2", "run:3", "run:4"]


async def test_the_oldest_closed_topics_are_dropped_past_the_event_bound():
    bus = EventBus(retain_events=10)
    for i in range(4):
        for step in range(4):
            bus.publish(f"sandbox:{i}", {"step": step})
        bus.close(f"sandbox:{i}")
    assert sorted(bus.history) == ["sandbox:2", "sandbox:3"]


async def test_a_finished_topic_leaves_no_subscriber_entry():
    bus = EventBus(retain_topics=1)
    bus.publish("run:a", {"type": "done"})
    bus.close("run:a")
    await replay(bus, "run:a")
    bus.publish("run:b", {"type": "done"})
    bus.close("run:b")  # pushes run:a out
    assert "run:a" not in bus.subscribers and "run:a" not in bus.closed
