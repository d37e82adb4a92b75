"""A Unix-socket proxy in front of the Docker engine that a test can cut: the engine lost and back,
for one daemon only (its DOCKER_HOST points here), while the shared engine itself never stops.

    proxy = await EngineProxy.start(tmp_path / "docker.sock")
    os.environ["DOCKER_HOST"] = proxy.url
    await proxy.cut()        # every open connection dropped; new ones answered 500 until restore
    proxy.restore()
    await proxy.close()
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

REAL_SOCKET = "/var/run/docker.sock"
DOWN_BODY = json.dumps({"message": "engine unavailable: the daemon is restarting"}).encode()


class EngineProxy:
    def __init__(self, path: Path, upstream: str) -> None:
        self.path = path
        self.upstream = upstream
        self.server: asyncio.AbstractServer | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.down = False
        self.refused = 0

    @classmethod
    async def start(cls, path: Path, upstream: str = REAL_SOCKET) -> "EngineProxy":
        proxy = cls(path, upstream)
        proxy.server = await asyncio.start_unix_server(proxy._serve, path=str(path))
        return proxy

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            await self._answer_down(reader, writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self.writers.discard(w)
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                writer.close()
            except RuntimeError:
                pass

    async def _answer_down(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """As an engine that is restarting answers through a socket proxy: 500 to each request."""
        self.refused += 1
        try:
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nConnection: close\r\n"
                         + f"Content-Length: {len(DOWN_BODY)}\r\n\r\n".encode() + DOWN_BODY)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def cut(self) -> None:
        """The engine is gone: open connections (exec streams included) drop, new ones get 500."""
        self.down = True
        for writer in list(self.writers):
            transport = writer.transport
            if transport is not None:
                transport.abort()
        self.writers.clear()
        await asyncio.sleep(0)

    def restore(self) -> None:
        self.down = False

    async def close(self) -> None:
        await self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
