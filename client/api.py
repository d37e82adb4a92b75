"""Async HTTP client for the svcd /v1 API over a Unix socket or TCP. Every other client (CLI, TUI,
MCP server, watch mode) talks to the daemon through this."""
from __future__ import annotations

import json
from typing import Any, AsyncIterator

import aiohttp

from client.config import ClientConfig


class ApiError(Exception):
    """A non-2xx answer, carrying the SPEC error body."""

    def __init__(self, status: int, body: dict[str, Any]):
        self.status = status
        self.body = body
        self.code = body.get("error", "error")
        self.details = body.get("details")
        super().__init__(f"{status} {self.code}: {body.get('message', '')}")


class DaemonUnreachable(Exception):
    pass


class Client:
    def __init__(self, config: ClientConfig):
        self.config = config
        self._session: aiohttp.ClientSession | None = None

    @property
    def root(self) -> str:
        return "http://svcd" if self.config.is_unix else self.config.base_url

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = (
                aiohttp.UnixConnector(path=str(self.config.socket_path), limit=64)
                if self.config.is_unix
                else aiohttp.TCPConnector(limit=64)
            )
            headers = {"User-Agent": "svc-client/0.1"}
            if self.config.api_key:
                headers["Authorization"] = f"Bearer {self.config.api_key}"
            self._session = aiohttp.ClientSession(connector=connector, headers=headers)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            async with self.session().request(
                method,
                self.root + path,
                json=json_body,
                data=data,
                params=clean,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self.config.timeout),
            ) as response:
                body = await response.read()
                if response.status >= 400:
                    try:
                        parsed = json.loads(body)
                    except ValueError:
                        parsed = {"error": "http_error", "message": body.decode("utf-8", "replace")[:500]}
                    raise ApiError(response.status, parsed)
                if raw:
                    return body
                if response.status == 204 or not body:
                    return None
                if response.content_type == "application/json":
                    return json.loads(body)
                return body.decode("utf-8", "replace")
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnreachable(f"cannot reach svcd at {self.config.base_url}: {exc}") from exc

    async def get(self, path: str, **kw: Any) -> Any:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return await self.request("POST", path, json_body=body, **kw)

    async def put(self, path: str, body: Any = None, **kw: Any) -> Any:
        return await self.request("PUT", path, json_body=body, **kw)

    async def delete(self, path: str, **kw: Any) -> Any:
        return await self.request("DELETE", path, **kw)

    async def paginate(self, path: str, params: dict[str, Any] | None = None, page_size: int = 100) -> AsyncIterator[Any]:
        cursor = None
        while True:
            page = await self.get(path, params={**(params or {}), "limit": page_size, "cursor": cursor})
            for item in page["items"]:
                yield item
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def sse(self, path: str, params: dict[str, Any] | None = None) -> AsyncIterator[Any]:
        """Follow a Server-Sent Events stream until the server closes it."""
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            async with self.session().get(
                self.root + path,
                params=clean,
                headers={"Accept": "text/event-stream"},
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                if response.status >= 400:
                    raise ApiError(response.status, await response.json())
                async for line in response.content:
                    text = line.decode("utf-8").rstrip("\r\n")
                    if text.startswith("data:"):
                        yield json.loads(text[5:].strip())
        except (aiohttp.ClientConnectorError, FileNotFoundError) as exc:
            raise DaemonUnreachable(f"cannot reach svcd at {self.config.base_url}: {exc}") from exc

    async def ndjson(self, path: str, params: dict[str, Any] | None = None) -> AsyncIterator[Any]:
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        async with self.session().get(
            self.root + path, params=clean, timeout=aiohttp.ClientTimeout(total=None, sock_read=self.config.timeout)
        ) as response:
            if response.status >= 400:
                raise ApiError(response.status, await response.json())
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)
