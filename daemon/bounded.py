"""Work on agent-controlled data runs off the event loop, with a time limit.

An agent decides what its files, its program's stdout and its database contain, so matching a
spec's regular expression against them, or parsing them, must neither pin the event loop (the
daemon would stop answering /health and could not be stopped) nor run for ever.

The one way, used everywhere such work happens (file_content regexes, custom-check stdout JSON,
sql check output, http_mock request matching, export and NDJSON stream encoding): :func:`run_bounded`
runs a plain function in a worker thread (a small pool of its own, like ``asyncio.to_thread`` but not
shared with the daemon's file I/O) and gives up after the limit with :class:`WorkTimeout`.
Regular expressions use the ``regex`` package with ``timeout=`` (the thread itself stops at the
limit) and ``concurrent=True`` (the match releases the GIL, so the loop keeps running meanwhile).
Parsing is linear in its input, and every input handed here is capped in size, so its thread ends
soon after a timeout too.

A check that runs out of time is ``failed`` with evidence ``{timeout: true, time_limit_s}``.
``SERVICE_CHECK_TIME_LIMIT_S`` sets the limit (default 10 s).
"""
from __future__ import annotations

import asyncio
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

import regex

T = TypeVar("T")
DEFAULT_LIMIT_S = 10.0


def time_limit_s() -> float:
    raw = os.environ.get("SERVICE_CHECK_TIME_LIMIT_S", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_LIMIT_S
    except ValueError:
        value = DEFAULT_LIMIT_S
    return value if value > 0 else DEFAULT_LIMIT_S


class WorkTimeout(Exception):
    def __init__(self, what: str, limit_s: float):
        super().__init__(f"{what} did not finish within {limit_s:g}s")
        self.what = what
        self.limit_s = limit_s

    def evidence(self) -> dict[str, Any]:
        return {"timeout": True, "time_limit_s": self.limit_s, "error": str(self)}


_pool: ThreadPoolExecutor | None = None
POOL_THREADS = 8


def _executor() -> ThreadPoolExecutor:
    """Threads of their own: agent-controlled work never takes the threads the daemon's own file and
    engine I/O (asyncio.to_thread) runs on."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="svc-bounded")
    return _pool


async def run_bounded(fn: Callable[..., T], *args: Any, what: str = "work", limit_s: float | None = None) -> T:
    """`fn(*args)` in a worker thread; WorkTimeout once `limit_s` has passed."""
    limit = time_limit_s() if limit_s is None else limit_s
    loop = asyncio.get_running_loop()
    try:
        return await asyncio.wait_for(loop.run_in_executor(_executor(), functools.partial(fn, *args)), limit)
    except TimeoutError:  # asyncio's, or the regex engine's own limit raised in the thread
        raise WorkTimeout(what, limit) from None


def compile_pattern(pattern: str, flags: int = 0) -> Any:
    """A spec's pattern as the checks run it (re-compatible V0 syntax); regex.error when invalid."""
    return regex.compile(pattern, flags | regex.V0)


async def regex_search(pattern: str, text: str, *, multiline: bool = True, what: str = "regex",
                       limit_s: float | None = None) -> Any:
    """`regex.search(pattern, text)` off the loop, GIL released, stopped after the limit."""
    limit = time_limit_s() if limit_s is None else limit_s
    flags = regex.MULTILINE if multiline else 0

    def search() -> Any:
        return compile_pattern(pattern, flags).search(text, timeout=limit, concurrent=True)

    try:
        return await run_bounded(search, what=what, limit_s=limit + 1.0)
    except WorkTimeout:
        raise WorkTimeout(what, limit) from None
