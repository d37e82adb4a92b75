"""Polling helpers: wait for a condition with a deadline (the deadline bounds the wait, it is never
the thing asserted)."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition",
                   sleep: Callable[[float], Awaitable[Any]] | None = None, interval: float = 0.05) -> Any:
    """Call `predicate()` (sync or async) until it returns something truthy; return that value.
    `sleep` lets a Textual pilot run between checks (`pilot.pause`)."""
    sleep = sleep or asyncio.sleep
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await sleep(interval)


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Await `check()` until it is truthy or the timeout passes; return its last value (the caller
    asserts on it, so the failure shows what was last seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(interval)


def wait_for_sync(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition", interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def eventually_sync(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.1) -> Any:
    """`eventually` for blocking code: call `check()` until it is truthy or the timeout passes and
    return its last value (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
