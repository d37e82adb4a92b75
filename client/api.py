"""Async HTTP client for the svcd API over a Unix socket or TCP. Every other client (CLI, TUI,
MCP server, watch mode) talks to the daemon through this, naming each operation by its entry of the
route table (`await client.call(R.GET_RUN, run_id=...)`, R from client.routes)."""
from __future__ import annotations

import asyncio
import json
import random
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import aiohttp

from client.config import ClientConfig

if TYPE_CHECKING:
    from daemon.contract.routes import Route


class ApiError(Exception):
    """A non-2xx answer, carrying the SPEC error body."""

    def __init__(self, status: int, body: dict[str, Any], headers: Any = None):
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.code = body.get("error", "error")
        self.details = body.get("details")
        super().__init__(f"{status} {self.code}: {body.get('message', '')}")


class DaemonUnreachable(Exception):
    pass


# Retries (SPEC "Errors"): 429 and 503 are refusals before any work, and a refused connection means the
# daemon is still starting, so every method may be retried. A dropped connection may have done the work:
# it is never retried.
RETRY_STATUSES = (429, 503)
MAX_ATTEMPTS = 6
BACKOFF_BASE_S = 0.2
BACKOFF_CAP_S = 5.0
MAX_RETRY_AFTER_S = 30.0


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Exponential backoff with jitter (half fixed, half random); at least the server's Retry-After."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt)
    delay = ceiling / 2 + random.uniform(0, ceiling / 2)
    return max(delay, retry_after or 0.0)


def retry_after_seconds(headers: Any) -> float | None:
    try:
        return max(0.0, float(headers.get("Retry-After", "")))
    except (TypeError, ValueError):
        return None


class _Refused(Exception):
    """No connection could be made (the cause is chained)."""


def _fresh_form(form: aiohttp.FormData) -> aiohttp.FormData:
    copy = aiohttp.FormData()
    for options, headers, value in form._fields:
        copy.add_field(options["name"], value, content_type=headers.get("Content-Type"), filename=options.get("filename"))
    return copy


class Client:
    def __init__(self, config: ClientConfig):
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        # The CLI and MCP server retry (MAX_ATTEMPTS); the TUI keeps its own reconnect loop and shows the outage.
        self.max_attempts = 1
        self.on_retry: Callable[[str], None] | None = None  # the CLI reports retries on stderr

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
        attempt = 0
        while True:
            try:
                return await self._once(method, path, json_body, data, clean, headers, timeout, raw)
            except ApiError as exc:
                wait = retry_after_seconds(exc.headers) if exc.status in RETRY_STATUSES else None
                if exc.status not in RETRY_STATUSES or attempt + 1 >= self.max_attempts or (wait or 0) > MAX_RETRY_AFTER_S:
                    raise
                reason = f"{exc.status} {exc.code}"
            except _Refused as exc:
                if attempt + 1 >= self.max_attempts:
                    raise DaemonUnreachable(f"cannot reach svcd at {self.config.base_url}: {exc.__cause__}") from exc.__cause__
                wait, reason = None, "connection refused"
            delay = backoff_delay(attempt, wait)
            attempt += 1
            if self.on_retry is not None:
                self.on_retry(f"{reason} from {self.config.base_url}; retrying in {delay:.1f}s (attempt {attempt + 1}/{self.max_attempts})")
            await asyncio.sleep(delay)

    async def _once(self, method: str, path: str, json_body: Any, data: Any, params: dict[str, str],
                    headers: dict[str, str] | None, timeout: float | None, raw: bool) -> Any:
        if data is not None and hasattr(data, "_fields"):
            data = _fresh_form(data)  # a FormData can be sent only once
        try:
            async with self.session().request(
                method,
                self.root + path,
                json=json_body,
                data=data,
                params=params,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self.config.timeout),
            ) as response:
                body = await response.read()
                if response.status >= 400:
                    try:
                        parsed = json.loads(body)
                    except ValueError:
                        parsed = {"error": "http_error", "message": body.decode("utf-8", "replace")[:500]}
                    if not isinstance(parsed, dict):
                        parsed = {"error": "http_error", "message": str(parsed)[:500]}
                    raise ApiError(response.status, parsed, response.headers)
                if raw:
                    return body
                if response.status == 204 or not body:
                    return None
                if response.content_type == "application/json":
                    return json.loads(body)
                return body.decode("utf-8", "replace")
        except (aiohttp.ClientConnectorError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise _Refused() from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise DaemonUnreachable(f"svcd at {self.config.base_url} closed the connection: {exc}") from exc
        except asyncio.TimeoutError:
            raise DaemonUnreachable(f"svcd at {self.config.base_url} did not answer {method} {path} within "
                                    f"{timeout or self.config.timeout:g}s (--timeout)") from None

    async def call(self, route: Route, *, body: Any = None, query: dict[str, Any] | None = None, data: Any = None,
                   headers: dict[str, str] | None = None, timeout: float | None = None, raw: bool = False,
                   **path_params: Any) -> Any:
        """One operation of the route table: its path filled from `path_params`, `body` sent as JSON
        (or `data` as a form), `query` as parameters (None values left out); the decoded answer
        (None on 204, bytes when `raw`). A non-2xx answer raises ApiError, as `request` does."""
        return await self.request(route.method, route.url(**path_params), json_body=body, data=data, params=query,
                                  headers=headers, timeout=timeout, raw=raw)

    async def pages(self, route: Route, *, query: dict[str, Any] | None = None, page_size: int = 100,
                    **path_params: Any) -> AsyncIterator[Any]:
        """Every item of a paginated route, following next_cursor."""
        async for item in self.paginate(route.url(**path_params), query, page_size):
            yield item

    async def stream(self, route: Route, *, query: dict[str, Any] | None = None, **path_params: Any) -> AsyncIterator[Any]:
        """A streaming route's items: SSE `data:` lines or NDJSON lines, as the route declares."""
        path = route.url(**path_params)
        items = self.sse(path, query) if route.stream == "text/event-stream" else self.ndjson(path, query)
        async for item in items:
            yield item

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

    async def _open_stream(self, path: str, params: dict[str, Any] | None, headers: dict[str, str] | None,
                           timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """A streaming answer's response once it is 2xx, with the same retries as `request` before the first byte."""
        clean = {k: str(v) for k, v in (params or {}).items() if v is not None}
        attempt = 0
        while True:
            try:
                response = await self.session().get(self.root + path, params=clean, headers=headers, timeout=timeout)
            except (aiohttp.ClientConnectorError, FileNotFoundError, ConnectionRefusedError) as exc:
                if attempt + 1 >= self.max_attempts:
                    raise DaemonUnreachable(f"cannot reach svcd at {self.config.base_url}: {exc}") from exc
                wait, reason = None, "connection refused"
            else:
                if response.status < 400:
                    return response
                body = await response.read()
                response.release()
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    parsed = {"error": "http_error", "message": body.decode("utf-8", "replace")[:500]}
                error = ApiError(response.status, parsed, response.headers)
                wait = retry_after_seconds(response.headers) if response.status in RETRY_STATUSES else None
                if response.status not in RETRY_STATUSES or attempt + 1 >= self.max_attempts or (wait or 0) > MAX_RETRY_AFTER_S:
                    raise error
                reason = f"{error.status} {error.code}"
            delay = backoff_delay(attempt, wait)
            attempt += 1
            if self.on_retry is not None:
                self.on_retry(f"{reason} from {self.config.base_url}; retrying in {delay:.1f}s (attempt {attempt + 1}/{self.max_attempts})")
            await asyncio.sleep(delay)

    async def sse(self, path: str, params: dict[str, Any] | None = None) -> AsyncIterator[Any]:
        """Follow a Server-Sent Events stream until the server closes it."""
        response = await self._open_stream(path, params, {"Accept": "text/event-stream"},
                                           aiohttp.ClientTimeout(total=None, sock_read=None))
        async with response:
            async for line in response.content:
                text = line.decode("utf-8").rstrip("\r\n")
                if text.startswith("data:"):
                    yield json.loads(text[5:].strip())

    async def ndjson(self, path: str, params: dict[str, Any] | None = None) -> AsyncIterator[Any]:
        response = await self._open_stream(path, params, None, aiohttp.ClientTimeout(total=None, sock_read=self.config.timeout))
        async with response:
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)
