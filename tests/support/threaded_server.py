"""An aiohttp app served on its own thread and event loop, so blocking tests (a CLI in a
subprocess) and async tests (an in-process daemon) use a fake server the same way.

A subclass adds its routes in `routes(app)` and names the URL path its clients start from in
`base_path`; `url` is set once started (`with Server() as s:` or `s.start()` / `s.stop()`)."""
from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from typing import Self

from aiohttp import web


class ThreadedServer(ABC):
    base_path = ""
    thread_name = "threaded-server"

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=self.thread_name, daemon=True)
        self._runner: web.AppRunner | None = None
        self.url = ""

    @abstractmethod
    def routes(self, app: web.Application) -> None:
        """Add the fake's handlers to `app`."""

    async def _start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}{self.base_path}"

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
