"""Reading Server-Sent Events the way a client does."""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Iterable


def parse_sse(text: str | bytes) -> list[dict[str, Any]]:
    """Every event in a complete SSE body: {"event": name or None, "id": id or None, "data": parsed
    JSON (or the raw string when it is not JSON)}; comments and keep-alives are skipped."""
    if isinstance(text, bytes):
        text = text.decode()
    events: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event = _parse_block(block.split("\n"))
        if event is not None:
            events.append(event)
    return events


def sse_data(text: str | bytes) -> list[Any]:
    """Only the `data` of every event of a complete SSE body."""
    return [e["data"] for e in parse_sse(text)]


def _parse_block(lines: Iterable[str]) -> dict[str, Any] | None:
    name = event_id = None
    data: list[str] = []
    for line in lines:
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "id":
            event_id = value
        elif field == "data":
            data.append(value)
    if not data:  # an event without data is not dispatched (SSE spec)
        return None
    raw = "\n".join(data)
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = raw
    return {"event": name, "id": event_id, "data": parsed}


async def iter_sse(response) -> AsyncIterator[dict[str, Any]]:
    """Events of an aiohttp streaming response as they arrive."""
    block: list[str] = []
    async for line in response.content:
        text = line.decode().rstrip("\r\n")
        if text == "":
            event = _parse_block(block)
            block = []
            if event is not None:
                yield event
        else:
            block.append(text)
    event = _parse_block(block)
    if event is not None:
        yield event


async def read_sse_data(response, timeout: float = 30) -> list[Any]:
    """The `data` of every event until the stream closes (bounded by `timeout`)."""
    out: list[Any] = []

    async def read() -> None:
        async for event in iter_sse(response):
            out.append(event["data"])

    await asyncio.wait_for(read(), timeout)
    return out
