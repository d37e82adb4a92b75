"""Real notification receivers for the alert tests: an HTTP server (scripted statuses, optionally
slow or held until released) and an SMTP server (aiosmtpd on its own thread)."""
from __future__ import annotations

import asyncio
import json
import socket
import time
from email import message_from_bytes
from typing import Any

from aiohttp import web
from aiosmtpd.controller import Controller


class HttpReceiver:
    """POSTs to any path are recorded; the answer is the next of `statuses`, then 200. With
    `delay` each answer waits that long; with `hold` set, answers wait until `release()`."""

    def __init__(self, statuses: tuple[int, ...] = (), delay: float = 0.0, hold: bool = False, port: int = 0):
        self.port = port  # 0: any free port; free_port() reserves one to start on later
        self.statuses = list(statuses)
        self.delay = delay
        self.calls: list[dict[str, Any]] = []
        self.arrived_at: list[float] = []  # wall-clock arrival of each call (benchmarks)
        self.released = asyncio.Event()
        if not hold:
            self.released.set()
        self.arrived = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> "HttpReceiver":
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def stop(self) -> None:
        self.released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def release(self) -> None:
        self.released.set()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        status = self.statuses.pop(0) if self.statuses else 200
        self.calls.append({"headers": dict(request.headers), "raw": raw, "body": json.loads(raw) if raw else None, "status": status})
        self.arrived_at.append(time.time())
        self.arrived.set()
        await self.released.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        return web.Response(status=status, text="ok" if status < 300 else "nope")

    @property
    def answered_ok(self) -> list[dict[str, Any]]:
        """Calls answered 2xx (each call's status is decided in arrival order)."""
        return [c for c in self.calls if c["status"] < 300]

    async def wait_calls(self, n: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.calls) < n:
            assert loop.time() < deadline, f"{len(self.calls)} of {n} calls arrived"
            await asyncio.sleep(0.02)
        return self.calls


def free_port() -> int:
    """A port nothing listens on yet (for a receiver started after the daemon has tried it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Collect:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd handler hook
        self.messages.append({"to": list(envelope.rcpt_tos), "from": envelope.mail_from,
                              "message": message_from_bytes(envelope.content)})
        return "250 OK"


class SmtpReceiver:
    """A real SMTP server on 127.0.0.1; `url` is what SERVICE_SMTP_URL takes."""

    def __init__(self) -> None:
        self.handler = _Collect()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)
        self.url = f"smtp://127.0.0.1:{self.port}"

    @property
    def messages(self) -> list[Any]:
        return self.handler.messages

    def start(self) -> "SmtpReceiver":
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    async def wait_messages(self, n: int, timeout: float = 15.0) -> list[Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.messages) < n:
            assert loop.time() < deadline, f"{len(self.messages)} of {n} messages arrived"
            await asyncio.sleep(0.02)
        return self.messages
