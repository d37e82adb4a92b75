"""Server-Sent Events and NDJSON streaming responses."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import weakref
from collections import Counter
from contextlib import contextmanager
from typing import Any, AsyncIterator, Iterator

from aiohttp import web

from daemon.appkeys import SETTINGS
from daemon.errors import TooManyStreams
from daemon.http import ResponseContractError, RouteInfo, render, to_jsonable

log = logging.getLogger("svcd.http")

# Open event streams per tenant, per app (SERVICE_MAX_STREAMS_PER_TENANT).
_OPEN_STREAMS: "weakref.WeakKeyDictionary[web.Application, Counter[str]]" = weakref.WeakKeyDictionary()


def open_streams(app: web.Application) -> Counter[str]:
    counts = _OPEN_STREAMS.get(app)
    if counts is None:
        counts = _OPEN_STREAMS[app] = Counter()
    return counts


@contextmanager
def stream_slot(request: web.Request) -> Iterator[None]:
    """One of the tenant's open-stream slots for as long as the stream is open; 429 (before any byte
    is sent) when the tenant already holds SERVICE_MAX_STREAMS_PER_TENANT of them."""
    tenant = request.get("tenant_id")
    if tenant is None:
        yield
        return
    counts = open_streams(request.app)
    limit = getattr(request.app.get(SETTINGS), "max_streams_per_tenant", 0)
    if limit and counts[tenant] >= limit:
        raise TooManyStreams(limit)
    counts[tenant] += 1
    try:
        yield
    finally:
        counts[tenant] -= 1
        if counts[tenant] <= 0:
            del counts[tenant]


def event_contract(request: web.Request) -> RouteInfo | None:
    """The route's info with its stream item model (RouteInfo.events) as the answer model, so each
    event goes through `daemon.http.render` like an HTTP answer: validated against the model,
    a mismatch logged, and with SERVICE_RESPONSE_VALIDATION strict (the default) refused."""
    route = request.match_info.route if request.match_info is not None else None
    info = getattr(route.handler, "route_info", None) if route is not None else None
    if info is None or info.events is None:
        return None
    return dataclasses.replace(info, response=info.events, paginated=False)


def encode_event(contract: RouteInfo | None, event: Any) -> bytes:
    """One event as compact JSON, through its stream's contract when it has one (raises
    ResponseContractError on a mismatch in strict mode)."""
    if contract is None:
        return json.dumps(to_jsonable(event), separators=(",", ":")).encode()
    return bytes(render(contract, event).body)


async def sse_response(request: web.Request, events: AsyncIterator[Any], heartbeat_s: float = 15.0,
                       timeout_s: float | None = None) -> web.StreamResponse:
    """Each event is one JSON object on a `data:` line followed by a blank line. The stream ends
    (cleanly, like at the end of its events) `timeout_s` seconds after it opened: by default the
    daemon's SERVICE_STREAM_TIMEOUT, so no stream is held open forever. A tenant holds at most
    SERVICE_MAX_STREAMS_PER_TENANT streams at once; one more is a 429 (see stream_slot).

    Events are validated against the route's declared `events` model (see encode_event). An event
    that does not match it is never sent: the stream ends with an `event: error` frame carrying
    the error body (500 internal_error) and the mismatch is in the daemon log."""
    if timeout_s is None:
        timeout_s = getattr(request.app.get(SETTINGS), "stream_timeout_s", None)
    try:
        with stream_slot(request):
            return await _sse(request, events, heartbeat_s, timeout_s)
    except TooManyStreams:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:  # never iterated: a subscription generator has nothing to undo
            try:
                await aclose()
            except Exception:
                pass
        raise


async def _sse(request: web.Request, events: AsyncIterator[Any], heartbeat_s: float, timeout_s: float | None) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200,
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Request-ID": request["request_id"],
        },
    )
    contract = event_contract(request)
    await response.prepare(request)
    iterator = events.__aiter__()
    pending = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s if timeout_s is not None else None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(iterator.__anext__())
            wait_s = heartbeat_s
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    break
                wait_s = min(wait_s, left)
            done, _ = await asyncio.wait({pending}, timeout=wait_s)
            if not done:
                if deadline is not None and loop.time() >= deadline:
                    break
                await response.write(b": keep-alive\n\n")
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                break
            pending = None
            try:
                payload = encode_event(contract, event)
            except ResponseContractError as err:
                body = json.dumps(err.body(request["request_id"]), separators=(",", ":"))
                await response.write(f"event: error\ndata: {body}\n\n".encode())
                break
            await response.write(b"data: " + payload + b"\n\n")
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            await asyncio.wait({pending})  # the generator's own cleanup (unsubscribe) runs before aclose
        aclose = getattr(iterator, "aclose", None)
        if aclose:
            try:
                await aclose()
            except Exception:
                pass
    try:
        await response.write_eof()
    except ConnectionResetError:
        pass
    return response


# Streams are written in chunks of about this many bytes; rows are encoded a batch at a time in a
# worker thread (daemon.bounded.run_bounded), so neither memory nor the event loop grows with them.
CHUNK_BYTES = 256 * 1024
BATCH_ROWS = 200
ENCODE_LIMIT_S = 60.0


def _encode_lines(rows: list[Any], contract: RouteInfo | None = None) -> bytes:
    if contract is not None:
        return b"".join(encode_event(contract, row) + b"\n" for row in rows)
    return "".join(json.dumps(to_jsonable(row), separators=(",", ":")) + "\n" for row in rows).encode()


def _encode_items(rows: list[Any]) -> bytes:
    return ",".join(json.dumps(to_jsonable(row), separators=(",", ":")) for row in rows).encode()


async def encode_rows(rows: list[Any], lines: bool = True, contract: RouteInfo | None = None) -> bytes:
    """`contract` (lines only; see event_contract): each row validated against the stream's model."""
    from daemon.bounded import run_bounded

    if lines:
        return await run_bounded(_encode_lines, rows, contract, what="encoding a stream", limit_s=ENCODE_LIMIT_S)
    return await run_bounded(_encode_items, rows, what="encoding a stream", limit_s=ENCODE_LIMIT_S)


async def batches(rows: AsyncIterator[Any], size: int = BATCH_ROWS) -> AsyncIterator[list[Any]]:
    batch: list[Any] = []
    async for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def chunked_response(request: web.Request, chunks: AsyncIterator[bytes], content_type: str,
                           headers: dict[str, str] | None = None) -> web.StreamResponse:
    """Write every chunk as it comes (coalesced up to CHUNK_BYTES). A client that goes away ends it.
    So does SERVICE_STREAM_TIMEOUT: a body still being sent (or not read) that long after it started
    is cut (the connection closed, so the client sees a short body, never a complete-looking one)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": content_type, "X-Request-ID": request["request_id"],
                                                       **(headers or {})})
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    timeout_s = getattr(request.app.get(SETTINGS), "stream_timeout_s", None)
    deadline = loop.time() + timeout_s if timeout_s is not None else None

    async def write(data: bytes) -> None:
        if deadline is None:
            await response.write(data)
            return
        left = deadline - loop.time()
        if left <= 0:
            raise asyncio.TimeoutError
        await asyncio.wait_for(response.write(data), left)

    pending: list[bytes] = []
    size = 0
    try:
        async for chunk in chunks:
            pending.append(chunk)
            size += len(chunk)
            if size >= CHUNK_BYTES:
                await write(b"".join(pending))
                pending, size = [], 0
        if pending:
            await write(b"".join(pending))
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    except asyncio.TimeoutError:
        log.warning("stream cut after SERVICE_STREAM_TIMEOUT (%ss)", timeout_s,
                    extra={"request_id": request.get("request_id"), "path": request.path})
        if request.transport is not None:
            request.transport.close()
    except Exception:  # the status line is gone: end the connection so the client sees a cut body
        logging.getLogger("svcd.http").exception("stream failed", extra={"request_id": request.get("request_id"),
                                                                         "path": request.path})
        if request.transport is not None:
            request.transport.close()
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose:
            try:
                await aclose()
            except Exception:
                pass
    return response


async def ndjson_response(request: web.Request, rows: AsyncIterator[Any], headers: dict[str, str] | None = None) -> web.StreamResponse:
    """One JSON line per row, each validated against the route's `events` model like an SSE event
    (sse_response): a row that does not match it (strict mode) is never sent and cuts the body
    (the status line is gone), with the mismatch in the daemon log."""
    contract = event_contract(request)

    async def chunks() -> AsyncIterator[bytes]:
        async for batch in batches(rows):
            yield await encode_rows(batch, contract=contract)

    return await chunked_response(request, chunks(), "application/x-ndjson", headers)
