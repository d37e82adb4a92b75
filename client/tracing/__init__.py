"""The svc agent tracing SDK (standard library only): `trace`, `span`, `tool_call`,
`record_tool_call`, `wrap_openai`, `wrap_anthropic`, `flush`. See `client/tracing/sdk.py`, which
also works on its own when copied into an agent as `svc_tracing.py`."""
from client.tracing.sdk import (  # noqa: F401
    SpanHandle,
    Tracer,
    configure,
    current_span,
    flush,
    get_tracer,
    record_tool_call,
    span,
    tool_call,
    trace,
    wrap_anthropic,
    wrap_openai,
)
from client.tracing.sdk import __all__  # noqa: F401


def sdk_source_path() -> str:
    """Path of the single-file SDK, for copying into a sandbox as svc_tracing.py."""
    import os

    return os.path.join(os.path.dirname(__file__), "sdk.py")
