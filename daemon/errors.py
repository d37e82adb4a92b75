"""API errors: every non-2xx answer is one of these, rendered as the SPEC error body."""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self, request_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message, "request_id": request_id}
        if self.details is not None:
            body["details"] = self.details
        return body


class InvalidRequest(ApiError):
    status, code = 400, "invalid_request"

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message, {"errors": errors} if errors is not None else None)


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"

    def __init__(self, resource: str, id: str, message: str | None = None):
        super().__init__(message or f"{resource} '{id}' not found", {"resource": resource, "id": id})


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class Conflict(ApiError):
    status, code = 409, "conflict"

    def __init__(self, message: str, state: str | None = None, **details: Any):
        super().__init__(message, {"state": state, **details})


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"

    def __init__(self, limit_bytes: int):
        super().__init__(f"request body exceeds {limit_bytes} bytes", {"limit_bytes": limit_bytes})


class UnsupportedMediaType(ApiError):
    status, code = 415, "unsupported_media_type"


class RateLimited(ApiError):
    status, code = 429, "rate_limited"

    def __init__(self, retry_after: int):
        super().__init__(
            f"rate limit exceeded; retry after {retry_after}s",
            {"retry_after": retry_after},
            {"Retry-After": str(retry_after)},
        )


class TooManyStreams(ApiError):
    """429: the tenant already holds as many open event streams as it may (SERVICE_MAX_STREAMS_PER_TENANT)."""

    status, code = 429, "rate_limited"

    def __init__(self, limit: int, retry_after: int = 5):
        super().__init__(
            f"too many open event streams: this tenant already has {limit} open, the most allowed "
            f"(SERVICE_MAX_STREAMS_PER_TENANT); close one and retry",
            {"retry_after": retry_after, "limit": limit, "resource": "streams"},
            {"Retry-After": str(retry_after)},
        )


class AtCapacity(ApiError):
    status, code = 503, "at_capacity"

    def __init__(self, limit: int, retry_after: int = 5, what: str = "sandbox"):
        super().__init__(
            f"{what} rejected: at capacity ({limit} concurrent)",
            {"retry_after": retry_after, "limit": limit},
            {"Retry-After": str(retry_after)},
        )
