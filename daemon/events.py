"""In-process pub/sub feeding the SSE streams. Each topic keeps its history so a late subscriber
first receives what already happened, then follows live.

A closed topic's history is kept for late subscribers only while it is among the newest
`retain_topics` closed topics holding at most `retain_events` events together (and until its owner
forgets it, at the latest 10 minutes on): a 1,000-run experiment would otherwise hold every run's and
sandbox's stream until then. The streams rebuild an older topic from the store."""
from __future__ import annotations

import asyncio
from collections import OrderedDict, defaultdict
from typing import Any, AsyncIterator

CLOSED = object()


class EventBus:
    def __init__(self, history_limit: int = 10_000, retain_topics: int = 200, retain_events: int = 20_000):
        self.history: dict[str, list[Any]] = defaultdict(list)
        self.subscribers: dict[str, set[asyncio.Queue]] = defaultdict(set)
        self.closed: set[str] = set()
        self.history_limit = history_limit
        self.retain_topics = retain_topics
        self.retain_events = retain_events
        self._retained: OrderedDict[str, int] = OrderedDict()  # closed topics, oldest first -> events held
        self._retained_events = 0

    def publish(self, topic: str, event: Any) -> None:
        if topic in self.closed:
            return
        history = self.history[topic]
        history.append(event)
        if len(history) > self.history_limit:
            del history[: len(history) - self.history_limit]
        for queue in self.subscribers.get(topic, ()):
            queue.put_nowait(event)

    def close(self, topic: str) -> None:
        """No more events on this topic; subscribers finish after draining."""
        if topic in self.closed:
            return
        self.closed.add(topic)
        for queue in self.subscribers.get(topic, ()):
            queue.put_nowait(CLOSED)
        held = len(self.history.get(topic, ()))
        self._retained[topic] = held
        self._retained_events += held
        while self._retained and (len(self._retained) > self.retain_topics or self._retained_events > self.retain_events):
            self.forget(next(iter(self._retained)))

    def forget(self, topic: str) -> None:
        self.history.pop(topic, None)
        self.closed.discard(topic)
        self._retained_events -= self._retained.pop(topic, 0)
        if not self.subscribers.get(topic, True):
            del self.subscribers[topic]

    async def subscribe(self, topic: str, replay: bool = True) -> AsyncIterator[Any]:
        queue: asyncio.Queue = asyncio.Queue()
        backlog = list(self.history.get(topic, [])) if replay else []
        done = topic in self.closed
        if not done:
            self.subscribers[topic].add(queue)
        try:
            for event in backlog:
                yield event
            if done:
                return
            while True:
                event = await queue.get()
                if event is CLOSED:
                    return
                yield event
        finally:
            queue_set = self.subscribers.get(topic)
            if queue_set is not None:
                queue_set.discard(queue)
                if not queue_set:
                    del self.subscribers[topic]
