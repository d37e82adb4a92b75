"""Server-Sent Events and NDJSON streaming responses."""
from __future__ import annotations

import json
from typing import Any, AsyncIterator

from aiohttp import web

from daemon.http import to_jsonable


async def sse_response(request: web.Request, events: AsyncIterator[Any], heartbeat_s: float = 15.0) -> web.StreamResponse:
    """Each event is one JSON object on a `data:` line followed by a blank line."""
    import asyncio

    response = web.StreamResponse(
        status=200,
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Request-ID": request["request_id"],
        },
    )
    await response.prepare(request)
    iterator = events.__aiter__()
    pending = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=heartbeat_s)
            if not done:
                await response.write(b": keep-alive\n\n")
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                break
            pending = None
            payload = json.dumps(to_jsonable(event), separators=(",", ":"))
            await response.write(f"data: {payload}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
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


async def ndjson_response(request: web.Request, rows: AsyncIterator[Any]) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "application/x-ndjson", "X-Request-ID": request["request_id"]}
    )
    await response.prepare(request)
    async for row in rows:
        await response.write((json.dumps(to_jsonable(row), separators=(",", ":")) + "\n").encode())
    await response.write_eof()
    return response
