"""Requests aiohttp cannot parse (a request line or header over its 8190-byte limit, a malformed
message) are answered before any middleware runs; this runner makes those answers the same JSON
error body as every other error (the document promises application/json), without echoing the
request, in the answer or the log (its query may hold a signature)."""
from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

CODES = {400: "invalid_request", 413: "payload_too_large", 431: "invalid_request", 500: "internal_error"}


class JsonErrorHandler(RequestHandler):
    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # as aiohttp: part of an answer went out, the connection is broken
            raise ConnectionError("response is sent already, cannot send another response with the error message")
        # logged by type only: aiohttp's message quotes the request line, whose query may hold a signature
        self.logger.info("unparsable request answered %d (%s)", status, type(exc).__name__ if exc else "unknown")
        if isinstance(exc, LineTooLong):
            text = "the request line or a header is longer than 8190 bytes"
        elif status >= 500:
            text = "internal error"
        else:
            text = f"malformed HTTP request ({type(exc).__name__ if exc else 'unparsable'})"
        response = web.json_response({"error": CODES.get(status, "invalid_request"), "message": text}, status=status)
        response.force_close()
        return response


class JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer unparsable requests with JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = JsonErrorServer  # the app builds its Server; only how it makes handlers changes
        return server
