"""In-process pub/sub feeding the SSE streams. Each topic keeps its history so a late subscriber
first receives what already happened, then follows live."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, AsyncIterator

CLOSED = object()


class EventBus:
    def __init__(self, history_limit: int = 10_000):
        self.history: dict[str, list[Any]] = defaultdict(list)
        self.subscribers: dict[str, set[asyncio.Queue]] = defaultdict(set)
        self.closed: set[str] = set()
        self.history_limit = history_limit

    def publish(self, topic: str, event: Any) -> None:
        if topic in self.closed:
            return
        history = self.history[topic]
        history.append(event)
        if len(history) > self.history_limit:
            del history[: len(history) - self.history_limit]
        for queue in self.subscribers[topic]:
            queue.put_nowait(event)

    def close(self, topic: str) -> None:
        """No more events on this topic; subscribers finish after draining."""
        if topic in self.closed:
            return
        self.closed.add(topic)
        for queue in self.subscribers[topic]:
            queue.put_nowait(CLOSED)

    def forget(self, topic: str) -> None:
        self.history.pop(topic, None)
        self.closed.discard(topic)

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
            self.subscribers[topic].discard(queue)
