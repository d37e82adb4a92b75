"""svc agent tracing SDK — standard library only.

Use it as `client.tracing` (installed with svc), or drop this file into an agent as `svc_tracing.py`
beside `provider_wire.py` (daemon/sandbox/programs: the providers' wire formats, read in one place
for the SDK, the model gateway and the daemon); svc's sandboxes ship both in /opt/svc/python. Both
import nothing outside the standard library.

    from client.tracing import trace, wrap_openai, record_tool_call, tool_call

    client = wrap_openai(OpenAI())          # or wrap_anthropic(Anthropic()); sync and async clients
    # traced: chat.completions.create, responses.create / responses.stream (OpenAI);
    # messages.create / messages.stream (Anthropic); plain and streamed

    @trace                                  # start + end events, nested through contextvars
    def solve(task: str) -> str:
        reply = client.chat.completions.create(model="gpt-4o", messages=[...], tools=[...])
        for call in reply.choices[0].message.tool_calls or []:
            with tool_call(call.function.name, call.function.arguments, tool_call_id=call.id) as t:
                t.set_output(run_tool(call))   # parented under the model call that asked for it
        ...

Routing (SPEC "Trace routing"), read from the environment when the first event is recorded:
- `SERVICE_SANDBOX_ID` set: `POST {SERVICE_BASE_URL}/v1/sandboxes/{id}/trace` with bearer
  `SERVICE_SANDBOX_TOKEN` (else `SERVICE_API_KEY`);
- only `SERVICE_API_KEY` set: `POST {SERVICE_BASE_URL}/v1/traces`;
- neither: tracing does nothing (decorated functions run untouched).
`SERVICE_BASE_URL` is `http://host:port` or `unix:///path/to.sock` (default: the local daemon
socket), or `file:///dir` (a drop directory the daemon reads back: a sandbox on a swarm node). `SERVICE_RUN_ID`, `SERVICE_EXPERIMENT_ID`, `SERVICE_SCENARIO_ID`, `SERVICE_AGENT`,
`SERVICE_AGENT_VERSION`, when set, stamp every event; `SERVICE_TRACE_ID` fixes the trace id of
top-level spans (inside a sandbox every top-level span of the process shares one trace anyway).

Events are queued (bounded; the oldest are dropped first and counted) and posted in batches by a
background thread; nothing here raises into the agent or blocks it; the queue is flushed at exit
(waiting at most `SERVICE_TRACE_FLUSH_TIMEOUT` seconds, default 5). A traced function's input is
its arguments as JSON and its output its return value as JSON (SPEC); `set_output()` keeps a string
as it is. `get_tracer().stats` counts queued, sent, dropped, failed and rejected events.
"""
from __future__ import annotations

import atexit
import collections
import contextvars
import functools
import http.client
import inspect
import json
import os
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from typing import Any, Callable, Optional

try:  # svc installed: the module its model gateway and daemon read the wire formats with
    from daemon.sandbox.programs import provider_wire as _wire
except ImportError:  # in an agent's container: shipped beside this file
    import provider_wire as _wire  # type: ignore[no-redef]

__all__ = [
    "trace", "span", "tool_call", "record_tool_call", "wrap_openai", "wrap_anthropic", "flush", "get_tracer",
    "configure", "current_span", "Tracer", "SpanHandle",
]

TEXT_LIMIT_BYTES = 4096
USER_AGENT = "svc-tracing/0.1"
_UNSET = object()


# -- small helpers -----------------------------------------------------------------------------------

def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _new_span_id() -> str:
    return "span_" + secrets.token_hex(8)


def _new_trace_id() -> str:
    return "trace-" + secrets.token_hex(16)


def _truncate(text: str, limit: int = TEXT_LIMIT_BYTES) -> str:
    if len(text) * 4 <= limit:
        return text
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    marker = len(f"…[truncated {len(raw)} bytes]".encode())
    kept = raw[: max(0, limit - marker)].decode("utf-8", "ignore")
    return f"{kept}…[truncated {len(raw) - len(kept.encode('utf-8'))} bytes]"


def _jsonable(value: Any, depth: int = 0) -> Any:
    """Best-effort conversion to JSON-able data (pydantic models, dataclasses, objects -> repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 6:
        return repr(value)[:200]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in list(value.items())[:200]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in list(value)[:200]]
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _jsonable(dump(), depth + 1)
        except Exception:
            pass
    if hasattr(value, "__dataclass_fields__"):
        try:
            import dataclasses

            return _jsonable(dataclasses.asdict(value), depth + 1)
        except Exception:
            pass
    return repr(value)[:500]


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, str):
        return _truncate(value)
    try:
        return _truncate(json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":")))
    except Exception:
        return _truncate(repr(value))


def _json_text(value: Any) -> str:
    """Always JSON (a returned string becomes a JSON string), as SPEC says of a traced function's output."""
    try:
        return _truncate(json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":")))
    except Exception:
        return _truncate(json.dumps(repr(value)))


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _default_socket() -> str:
    if os.environ.get("SERVICE_SOCKET"):
        return os.path.expanduser(os.environ["SERVICE_SOCKET"])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "svc", "svcd.sock")
    home = os.environ.get("SERVICE_HOME") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "svc")
    return os.path.join(os.path.expanduser(home), "svcd.sock")


# -- transport ---------------------------------------------------------------------------------------

class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._socket_path)
        self.sock = sock


DROP_MAX_BYTES = 64 * 1024 * 1024  # a file:// drop directory holds at most this much per process


class Transport:
    """POSTs JSON to the daemon over http(s):// or unix://, keeping one connection alive; or, for
    `file:///dir` (a sandbox on a swarm node, where no daemon socket reaches), appends each body as
    one line to `/dir/spans-<pid>.jsonl`, which the daemon reads back after the agent and ingests
    as if posted with the sandbox's token."""

    def __init__(self, base_url: str, timeout: float = 10.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._conn: Optional[http.client.HTTPConnection] = None
        self._written = 0
        if self.base_url.startswith("unix://"):
            self.kind, self.target, self.prefix = "unix", self.base_url[len("unix://"):], ""
        elif self.base_url.startswith("file://"):
            self.kind, self.target, self.prefix = "file", self.base_url[len("file://"):] or "/", ""
        else:
            parsed = urllib.parse.urlsplit(self.base_url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"SERVICE_BASE_URL must be http(s)://host:port or unix:///path, got {base_url!r}")
            self.kind, self.target, self.prefix = parsed.scheme, parsed.netloc, parsed.path.rstrip("/")

    def _connect(self) -> http.client.HTTPConnection:
        if self.kind == "unix":
            return _UnixHTTPConnection(self.target, self.timeout)
        if self.kind == "https":
            return http.client.HTTPSConnection(self.target, timeout=self.timeout)
        return http.client.HTTPConnection(self.target, timeout=self.timeout)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.kind == "file":
            if self._written + len(body) + 1 > DROP_MAX_BYTES:
                return 413, b"the trace drop file is full"
            with open(os.path.join(self.target, f"spans-{os.getpid()}.jsonl"), "ab") as drop:
                drop.write(body.replace(b"\n", b" ") + b"\n")  # JSON has no raw newline; one body per line
            self._written += len(body) + 1
            return 200, b"{}"
        for attempt in (0, 1):  # a kept-alive connection the server closed: reconnect once
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request("POST", self.prefix + path, body=body, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, data
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt:
                    raise
        raise OSError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None


# -- exporter ----------------------------------------------------------------------------------------

class Exporter:
    """A bounded queue drained by one background thread in batches. Never raises, never blocks the
    caller beyond a lock: when the queue is full the oldest event is dropped and counted."""

    def __init__(self, transport: Transport, path: str, token: Optional[str], max_queue: int = 10_000,
                 batch_size: int = 500, interval_s: float = 0.25, retries: int = 3):
        self.transport = transport
        self.path = path
        self.headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.interval_s = interval_s
        self.retries = retries
        self.queue: collections.deque = collections.deque()
        self.cond = threading.Condition()
        self.inflight = 0
        self.stopping = False
        self.thread: Optional[threading.Thread] = None
        self.stats = {"queued": 0, "sent": 0, "dropped": 0, "failed": 0, "rejected": 0}
        self.last_error: Optional[str] = None

    def enqueue(self, event: dict[str, Any]) -> None:
        with self.cond:
            if len(self.queue) >= self.max_queue:
                self.queue.popleft()
                self.stats["dropped"] += 1
            self.queue.append(event)
            self.stats["queued"] += 1
            if self.thread is None or not self.thread.is_alive():
                self._start_thread()
            if len(self.queue) >= self.batch_size:
                self.cond.notify_all()

    def _start_thread(self) -> None:
        try:
            self.thread = threading.Thread(target=self._loop, name="svc-tracing-exporter", daemon=True)
            self.thread.start()
        except RuntimeError:  # interpreter shutting down: flush() sends from the caller's thread
            self.thread = None

    def _take(self) -> list[dict[str, Any]]:
        batch = []
        while self.queue and len(batch) < self.batch_size:
            batch.append(self.queue.popleft())
        self.inflight += len(batch)
        return batch

    def _loop(self) -> None:
        while True:
            with self.cond:
                if not self.queue and not self.stopping:
                    self.cond.wait(self.interval_s)
                if not self.queue:
                    if self.stopping:
                        return
                    continue
                if len(self.queue) < self.batch_size and not self.stopping:
                    self.cond.wait(self.interval_s)  # let a batch build up a little
                batch = self._take()
            try:
                self._send(batch)
            finally:
                with self.cond:
                    self.inflight -= len(batch)
                    self.cond.notify_all()

    def _send(self, batch: list[dict[str, Any]]) -> None:
        if not batch:
            return
        try:
            body = json.dumps({"events": batch}, ensure_ascii=False, separators=(",", ":"), default=str).encode()
        except Exception as exc:
            self.stats["failed"] += len(batch)
            self.last_error = f"serialise: {exc}"
            return
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                status, data = self.transport.post(self.path, body, self.headers)
            except Exception as exc:
                status, data = 0, str(exc).encode()
            if 200 <= status < 300:
                self.stats["sent"] += len(batch)
                try:
                    self.stats["rejected"] += int(json.loads(data).get("rejected", 0))
                except Exception:
                    pass
                return
            self.last_error = f"{status}: {data[:300].decode('utf-8', 'replace')}"
            if status and status < 500 and status != 429:
                break  # the daemon said no; retrying will not help
            if attempt < self.retries and not self.stopping:
                time.sleep(delay)
                delay *= 3
        self.stats["failed"] += len(batch)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued so far is sent (or given up); False on timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            if self.queue and (self.thread is None or not self.thread.is_alive()):
                self._start_thread()
            if self.thread is None:  # no thread possible: send here
                while self.queue:
                    batch = self._take()
                    self.cond.release()
                    try:
                        self._send(batch)
                    finally:
                        self.cond.acquire()
                        self.inflight -= len(batch)
                return True
            self.cond.notify_all()
            while self.queue or self.inflight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.notify_all()
                self.cond.wait(min(remaining, 0.05))
        return True

    def shutdown(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.transport.close()


# -- spans -------------------------------------------------------------------------------------------

class SpanHandle:
    """An open span. `set_output`, `set_metadata`, `set_cost`, `set_status` before it ends."""

    __slots__ = ("tracer", "span_id", "trace_id", "root_span_id", "parent_span_id", "name", "event_type",
                 "started", "ts", "output", "metadata", "cost", "status", "error_type", "ended", "token")

    def __init__(self, tracer: "Tracer", name: str, event_type: str, parent: Optional["SpanHandle"], trace_id: Optional[str] = None):
        self.tracer = tracer
        self.span_id = _new_span_id()
        self.name = name
        self.event_type = event_type
        if parent is not None:
            self.trace_id, self.root_span_id, self.parent_span_id = parent.trace_id, parent.root_span_id, parent.span_id
        else:
            self.trace_id = trace_id or tracer.top_level_trace_id()
            self.root_span_id, self.parent_span_id = self.span_id, None
        self.started = time.perf_counter()
        self.ts = _now_iso()
        self.output: Any = _UNSET
        self.metadata: dict[str, Any] = {}
        self.cost: Optional[dict[str, Any]] = None
        self.status: Optional[str] = None
        self.error_type: Optional[str] = None
        self.ended = False
        self.token: Any = None

    def set_output(self, value: Any) -> None:
        """The span's output: a string is stored as it is, anything else as JSON (4 KB at most)."""
        self.output = value

    def set_metadata(self, **values: Any) -> None:
        self.metadata.update(values)

    def set_cost(self, model: Optional[str] = None, input_tokens: Optional[int] = None, output_tokens: Optional[int] = None,
                 cached_tokens: Optional[int] = None) -> None:
        self.cost = {k: v for k, v in (("model", model), ("input_tokens", input_tokens), ("output_tokens", output_tokens),
                                       ("cached_tokens", cached_tokens)) if v is not None}

    def set_status(self, status: str, error_type: Optional[str] = None) -> None:
        self.status, self.error_type = status, error_type

    def _base(self) -> dict[str, Any]:
        event = {"event_type": self.event_type, "tool": self.name, "span_id": self.span_id, "trace_id": self.trace_id,
                 "root_span_id": self.root_span_id}
        if self.parent_span_id:
            event["parent_span_id"] = self.parent_span_id
        return event


_current: contextvars.ContextVar[Optional[SpanHandle]] = contextvars.ContextVar("svc_tracing_span", default=None)


class _LLMRef:
    """The latest model call in this context and the tool uses it requested (for parenting tool calls)."""

    __slots__ = ("span_id", "trace_id", "root_span_id", "pending")

    def __init__(self, span_id: str, trace_id: str, root_span_id: str):
        self.span_id, self.trace_id, self.root_span_id = span_id, trace_id, root_span_id
        self.pending: list[tuple[Optional[str], str, str]] = []  # (tool_call_id, name, tool_use span id)


_last_llm: contextvars.ContextVar[Optional[_LLMRef]] = contextvars.ContextVar("svc_tracing_llm", default=None)
# Set while a stream helper (`responses.stream()`) opens its stream: the helper records the call, so
# the `create` it calls underneath does not record it a second time.
_in_stream_helper: contextvars.ContextVar[bool] = contextvars.ContextVar("svc_tracing_in_stream_helper", default=False)


def current_span() -> Optional[SpanHandle]:
    return _current.get()


class Tracer:
    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, sandbox_id: Optional[str] = None,
                 sandbox_token: Optional[str] = None, enabled: Optional[bool] = None, env: Optional[dict[str, str]] = None,
                 **exporter_options: Any):
        env = dict(os.environ if env is None else env)
        sandbox_id = sandbox_id or env.get("SERVICE_SANDBOX_ID") or None
        api_key = api_key or env.get("SERVICE_API_KEY") or None
        sandbox_token = sandbox_token or env.get("SERVICE_SANDBOX_TOKEN") or None
        self.sandbox_id = sandbox_id
        self.exporter: Optional[Exporter] = None
        self.stamps = {field: env[var] for field, var in (
            ("run_id", "SERVICE_RUN_ID"), ("experiment_id", "SERVICE_EXPERIMENT_ID"), ("scenario_id", "SERVICE_SCENARIO_ID"),
            ("agent", "SERVICE_AGENT"), ("agent_version", "SERVICE_AGENT_VERSION")) if env.get(var)}
        self._process_trace_id = env.get("SERVICE_TRACE_ID") or (
            (_inherited_trace_id or _new_trace_id()) if sandbox_id else None)
        self.error: Optional[str] = None
        if sandbox_id:
            path, token = f"/v1/sandboxes/{urllib.parse.quote(sandbox_id, safe='')}/trace", sandbox_token or api_key
        elif api_key:
            path, token = "/v1/traces", api_key
        else:
            path, token = None, None
        self.enabled = bool(path) if enabled is None else (enabled and bool(path))
        if self.enabled and path:
            try:
                transport = Transport(base_url or env.get("SERVICE_BASE_URL") or "unix://" + _default_socket())
                self.exporter = Exporter(transport, path, token, **exporter_options)
            except Exception as exc:  # a bad base URL disables tracing, it never breaks the agent
                self.enabled, self.error = False, str(exc)

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.exporter.stats) if self.exporter else {}

    def top_level_trace_id(self) -> str:
        return self._process_trace_id or _new_trace_id()

    def emit(self, event: dict[str, Any]) -> None:
        if not self.enabled or self.exporter is None:
            return
        try:
            event.setdefault("ts", _now_iso())
            for key, value in self.stamps.items():
                event.setdefault(key, value)
            self.exporter.enqueue(event)
        except Exception:
            pass

    def flush(self, timeout: float = 5.0) -> bool:
        return self.exporter.flush(timeout) if self.exporter else True

    def shutdown(self, timeout: float = 5.0) -> None:
        if self.exporter:
            try:
                self.exporter.shutdown(timeout)
            except Exception:
                pass

    # spans ---------------------------------------------------------------------------------------

    def start_span(self, name: str, event_type: str = "span", input: Any = _UNSET, metadata: Optional[dict] = None,
                   parent: Any = _UNSET, activate: bool = True) -> SpanHandle:
        handle = SpanHandle(self, name, event_type, _current.get() if parent is _UNSET else parent)
        if metadata:
            handle.metadata.update(metadata)
        event = handle._base()
        event.update(ts=handle.ts, phase="start")
        if input is not _UNSET:
            event["input"] = _text(input)
        if handle.metadata:
            event["metadata"] = _jsonable(handle.metadata)
        self.emit(event)
        if activate:
            handle.token = _current.set(handle)
        return handle

    def end_span(self, handle: SpanHandle, output: Any = _UNSET, error: Optional[BaseException] = None,
                 json_output: bool = False) -> None:
        if handle.ended:
            return
        handle.ended = True
        if handle.token is not None:
            try:
                _current.reset(handle.token)
            except ValueError:  # ended in another context than it started in
                if _current.get() is handle:
                    _current.set(None)
        event = handle._base()
        event.update(phase="end", duration_ms=round((time.perf_counter() - handle.started) * 1000, 3))
        if error is not None:
            event["status"] = "error"
            event["error_type"] = handle.error_type or ("tool_error" if handle.event_type == "tool_call" else type(error).__name__)
            event["output"] = _truncate(f"{type(error).__name__}: {error}")
            handle.metadata.setdefault("exception", type(error).__name__)
        else:
            event["status"] = handle.status or "ok"
            if handle.error_type:
                event["error_type"] = handle.error_type
            if handle.output is not _UNSET:
                event["output"] = _text(handle.output)
            elif output is not _UNSET:
                event["output"] = _json_text(output) if json_output else _text(output)
        if handle.cost:
            event["cost"] = handle.cost
        if handle.metadata:
            event["metadata"] = _jsonable(handle.metadata)
        self.emit(event)


_tracer: Optional[Tracer] = None
_tracer_lock = threading.Lock()
_inherited_trace_id: Optional[str] = None  # a forked child keeps its parent's process trace


def get_tracer() -> Tracer:
    global _tracer
    if _tracer is None:
        with _tracer_lock:
            if _tracer is None:
                _tracer = Tracer()
    return _tracer


def configure(**options: Any) -> Tracer:
    """Replace the process tracer (flushing the old one): Tracer(**options); env fills the rest."""
    global _tracer
    with _tracer_lock:
        old, _tracer = _tracer, Tracer(**options)
    if old is not None:
        old.shutdown(timeout=2.0)
    return _tracer


def flush(timeout: float = 5.0) -> bool:
    return _tracer.flush(timeout) if _tracer is not None else True


def _at_exit() -> None:
    if _tracer is not None:
        try:
            _tracer.shutdown(float(os.environ.get("SERVICE_TRACE_FLUSH_TIMEOUT", "5")))
        except Exception:
            pass


atexit.register(_at_exit)


def _after_fork() -> None:
    # The child gets a fresh tracer (the parent's thread and lock do not survive fork), in the same trace.
    global _tracer, _tracer_lock, _inherited_trace_id
    if _tracer is not None and _tracer._process_trace_id:
        _inherited_trace_id = _tracer._process_trace_id
    _tracer, _tracer_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


# -- the decorator and context managers ------------------------------------------------------------

_signatures: dict[Any, Optional[inspect.Signature]] = {}


def _call_input(fn: Callable, args: tuple, kwargs: dict) -> Any:
    try:
        sig = _signatures.get(fn, _UNSET)
        if sig is _UNSET:
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                sig = None
            _signatures[fn] = sig
        if sig is None:
            return {"args": list(args), "kwargs": kwargs}
        bound = sig.bind_partial(*args, **kwargs).arguments
        params = list(sig.parameters)
        if params and params[0] in ("self", "cls") and params[0] in bound:
            bound = {k: v for k, v in bound.items() if k != params[0]}
        return dict(bound)
    except Exception:
        return {"args": list(args), "kwargs": kwargs}


def trace(func: Any = None, *, name: Optional[str] = None, event_type: str = "span", capture_input: bool = True,
          capture_output: bool = True, metadata: Optional[dict] = None) -> Any:
    """Trace a sync or async function: a `start` event (arguments as JSON input) and an `end` event
    (duration_ms, status, return value as JSON output, or status error with the error text; the
    exception is re-raised). `@trace`, `@trace("name")`, `@trace(name=..., event_type="tool_call")`."""
    if isinstance(func, str):
        name, func = func, None

    def decorate(fn: Callable) -> Callable:
        span_name = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "function")

        def begin(args: tuple, kwargs: dict) -> Optional[SpanHandle]:
            tracer = get_tracer()
            if not tracer.enabled:
                return None
            try:
                return tracer.start_span(span_name, event_type, _call_input(fn, args, kwargs) if capture_input else _UNSET, metadata)
            except Exception:
                return None

        def finish(handle: Optional[SpanHandle], result: Any = _UNSET, error: Optional[BaseException] = None) -> None:
            if handle is None:
                return
            try:
                handle.tracer.end_span(handle, result if capture_output else _UNSET, error, json_output=True)
            except Exception:
                pass

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                handle = begin(args, kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as exc:
                    finish(handle, error=exc)
                    raise
                finish(handle, result)
                return result

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            handle = begin(args, kwargs)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                finish(handle, error=exc)
                raise
            finish(handle, result)
            return result

        return wrapper

    if func is not None and callable(func):
        return decorate(func)
    return decorate


class _SpanContext:
    """`with span(...) as s:` / `async with span(...) as s:` — a span around a block."""

    def __init__(self, name: str, event_type: str, input: Any, metadata: Optional[dict], parent: Any = _UNSET,
                 on_enter: Optional[Callable[[SpanHandle], None]] = None):
        self.args = (name, event_type, input, metadata, parent)
        self.handle: Optional[SpanHandle] = None
        self.on_enter = on_enter

    def __enter__(self) -> SpanHandle:
        name, event_type, input, metadata, parent = self.args
        tracer = get_tracer()
        try:
            if tracer.enabled:
                self.handle = tracer.start_span(name, event_type, input, metadata, parent)
                if self.on_enter:
                    self.on_enter(self.handle)
                return self.handle
        except Exception:
            pass
        return SpanHandle(Tracer(enabled=False, env={}), name, event_type, None, "trace-disabled")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self.handle is not None:
            try:
                self.handle.tracer.end_span(self.handle, error=exc)
            except Exception:
                pass
        return False

    async def __aenter__(self) -> SpanHandle:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return self.__exit__(exc_type, exc, tb)


def span(name: str, event_type: str = "span", input: Any = _UNSET, metadata: Optional[dict] = None) -> _SpanContext:
    return _SpanContext(name, event_type, input, metadata)


def _tool_parent(name: str, tool_call_id: Optional[str]) -> tuple[Any, dict[str, Any]]:
    """The model call that requested this tool (matched by tool_call_id, else by name, else the
    latest model call in this context), or the current span."""
    ref = _last_llm.get()
    current = _current.get()
    if ref is None or (current is not None and current.trace_id != ref.trace_id):
        return _UNSET, {}
    extra: dict[str, Any] = {}
    match = None
    for i, (call_id, tool_name, use_span) in enumerate(ref.pending):
        if (tool_call_id and call_id == tool_call_id) or (not tool_call_id and tool_name == name):
            match = i
            break
    if match is not None:
        call_id, _, use_span = ref.pending.pop(match)
        extra["tool_use_span_id"] = use_span
        if call_id:
            extra["tool_call_id"] = call_id
    elif tool_call_id:
        extra["tool_call_id"] = tool_call_id
    parent = SpanHandle.__new__(SpanHandle)
    parent.span_id, parent.trace_id, parent.root_span_id = ref.span_id, ref.trace_id, ref.root_span_id
    return parent, extra


def tool_call(name: str, input: Any = _UNSET, tool_call_id: Optional[str] = None, metadata: Optional[dict] = None) -> _SpanContext:
    """`with tool_call("search", args, tool_call_id=call.id) as t: t.set_output(run(...))` — the
    execution of a tool the model requested: `tool_call` start/end events parented under that model
    call; spans opened inside are its children; an exception makes it status error (`tool_error`)."""
    try:
        parent, extra = _tool_parent(name, tool_call_id)
    except Exception:
        parent, extra = _UNSET, {}
    return _SpanContext(name, "tool_call", input, {**(metadata or {}), **extra} or None, parent)


def record_tool_call(name: str, input: Any = None, output: Any = None, status: str = "ok", *, error: Any = None,
                     duration_ms: Optional[float] = None, tool_call_id: Optional[str] = None,
                     metadata: Optional[dict] = None) -> None:
    """Record a finished tool execution as one `complete` tool_call event, parented under the model
    call that requested it. Never raises."""
    try:
        tracer = get_tracer()
        if not tracer.enabled:
            return
        parent, extra = _tool_parent(name, tool_call_id)
        handle = SpanHandle(tracer, name, "tool_call", _current.get() if parent is _UNSET else parent)
        event = handle._base()
        event.update(phase="complete", status="error" if (error is not None or status == "error") else "ok")
        if input is not None:
            event["input"] = _text(input)
        if error is not None:
            event["error_type"] = "tool_error"
            event["output"] = _truncate(error if isinstance(error, str) else f"{type(error).__name__}: {error}")
        elif output is not None:
            event["output"] = _text(output)
        if event["status"] == "error":
            event.setdefault("error_type", "tool_error")
        if duration_ms is not None:
            event["duration_ms"] = duration_ms
            started = time.time() - duration_ms / 1000
            event["ts"] = datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
        meta = {**(metadata or {}), **extra}
        if meta:
            event["metadata"] = _jsonable(meta)
        tracer.emit(event)
    except Exception:
        pass


# -- LLM client wrappers -----------------------------------------------------------------------------

class _LLMCall:
    """One model call: an `llm_call` complete event (model, tokens, latency; the daemon prices it) and
    one `tool_use` event per tool the model asked for."""

    def __init__(self, tracer: Tracer, provider: str, tool: str, request: dict[str, Any]):
        self.tracer = tracer
        self.provider = provider
        self.handle = SpanHandle(tracer, tool, "llm_call", _current.get())
        self.request = request
        self.stream_state: dict[str, Any] = {}

    def _input(self) -> Any:
        req = self.request
        data: dict[str, Any] = {}
        if req.get("system") or req.get("instructions"):
            data["system"] = req.get("system") or req.get("instructions")
        if "input" in req and "messages" not in req:  # the Responses API: a string or a list of items
            items = req["input"]
            if isinstance(items, list) and len(items) > 6:
                data["input_omitted"], items = len(items) - 6, items[-6:]
            data["input"] = items
            return data
        messages = req.get("messages") or []
        if isinstance(messages, list) and len(messages) > 6:
            data["messages_omitted"] = len(messages) - 6
            messages = messages[-6:]
        data["messages"] = messages
        return data

    def _metadata(self, extra: dict[str, Any]) -> dict[str, Any]:
        req = self.request
        meta: dict[str, Any] = {"provider": self.provider}
        tools = req.get("tools")
        if isinstance(tools, list) and tools:
            names = []
            for t in tools:
                fn = _get(t, "function")
                names.append(_get(fn, "name") if fn is not None else _get(t, "name"))
            meta["tools"] = [n for n in names if n]
        for key in ("temperature", "max_tokens", "max_completion_tokens", "max_output_tokens", "tool_choice", "stream"):
            if req.get(key) is not None:
                meta[key] = _jsonable(req[key])
        meta.update({k: v for k, v in extra.items() if v is not None})
        return meta

    def finish(self, model: Any, usage: tuple[Any, ...], output: Any, tool_uses: list[tuple[Optional[str], str, Any]],
               extra: dict[str, Any], error: Optional[BaseException] = None) -> None:
        try:
            h = self.handle
            event = h._base()
            event.update(ts=h.ts, phase="complete", duration_ms=round((time.perf_counter() - h.started) * 1000, 3))
            event["input"] = _text(self._input())
            model = model or self.request.get("model")
            inp, out, cached = usage[:3]
            reasoning = usage[3] if len(usage) > 3 else None
            # no usage (a stream without it): no token counts, so the daemon records the cost as unknown
            cost = {k: v for k, v in (("model", model), ("input_tokens", inp), ("output_tokens", out), ("cached_tokens", cached),
                                      ("reasoning_tokens", reasoning)) if v is not None}
            if cost:
                event["cost"] = cost
            if error is not None:
                event.update(status="error", error_type=type(error).__name__, output=_truncate(f"{type(error).__name__}: {error}"))
            else:
                event["status"] = "ok"
                if output is not None:
                    event["output"] = _text(output)
            event["metadata"] = _jsonable(self._metadata(extra))
            self.tracer.emit(event)
            ref = _LLMRef(h.span_id, h.trace_id, h.root_span_id)
            for call_id, name, arguments in tool_uses:
                use = SpanHandle(self.tracer, name, "tool_use", h)
                use_event = use._base()
                use_event.update(phase="invoked", input=_text(arguments))
                if call_id:
                    use_event["metadata"] = {"tool_call_id": call_id}
                self.tracer.emit(use_event)
                ref.pending.append((call_id, name, use.span_id))
            if error is None:
                _last_llm.set(ref)
        except Exception:
            pass


def _plain(value: Any) -> Any:
    """An SDK object (pydantic model) as the JSON the provider sent; a dict as it is."""
    if value is None or isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:
            return None
    return None


def _openai_usage(usage: Any) -> tuple[Any, Any, Any, Any]:
    """(input, output, cached, reasoning) of a Chat Completions or Responses usage."""
    u = _plain(usage)
    if not isinstance(u, dict):
        return None, None, None, None
    n = _wire.openai_usage(u)
    return n["input_tokens"], n["output_tokens"], n["cached_input_tokens"], _wire.reasoning_tokens(u)


def _openai_result(call: _LLMCall, response: Any) -> None:
    usage_t = _openai_usage(_get(response, "usage"))
    choices = _get(response, "choices") or []
    message = _get(choices[0], "message") if choices else None
    tool_uses = []
    for tc in _get(message, "tool_calls") or []:
        fn = _get(tc, "function")
        tool_uses.append((_get(tc, "id"), _get(fn, "name") or "tool", _get(fn, "arguments")))
    content = _get(message, "content")
    output: Any = content
    if tool_uses:
        output = {"content": content, "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in tool_uses]}
    extra = {"finish_reason": _get(choices[0], "finish_reason") if choices else None, "response_id": _get(response, "id")}
    call.finish(_get(response, "model"), usage_t, output, tool_uses, extra)


def _openai_chunk(call: _LLMCall, chunk: Any) -> None:
    st = call.stream_state
    st["model"] = _get(chunk, "model") or st.get("model")
    st["id"] = _get(chunk, "id") or st.get("id")
    usage = _get(chunk, "usage")
    if usage is not None:
        st["usage"] = usage
    for choice in _get(chunk, "choices") or []:
        delta = _get(choice, "delta")
        if _get(choice, "finish_reason"):
            st["finish_reason"] = _get(choice, "finish_reason")
        text = _get(delta, "content")
        if text:
            st.setdefault("content", []).append(text)
        for tc in _get(delta, "tool_calls") or []:
            calls = st.setdefault("tool_calls", {})
            entry = calls.setdefault(_get(tc, "index", len(calls)), {"id": None, "name": "", "arguments": ""})
            fn = _get(tc, "function")
            entry["id"] = _get(tc, "id") or entry["id"]
            entry["name"] += _get(fn, "name") or ""
            entry["arguments"] += _get(fn, "arguments") or ""


def _openai_stream_done(call: _LLMCall, error: Optional[BaseException]) -> None:
    st = call.stream_state
    tool_uses = [(e["id"], e["name"] or "tool", e["arguments"]) for _, e in sorted(st.get("tool_calls", {}).items())]
    content = "".join(st.get("content", [])) or None
    output: Any = {"content": content, "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in tool_uses]} if tool_uses else content
    call.finish(st.get("model"), _openai_usage(st.get("usage")),
                output, tool_uses, {"finish_reason": st.get("finish_reason"), "response_id": st.get("id")}, error)


def _responses_result(call: _LLMCall, response: Any, error: Optional[BaseException] = None) -> None:
    """A Responses API `Response`: output text, the function calls it asks for, usage."""
    usage_t = _openai_usage(_get(response, "usage"))
    tool_uses, texts = [], []
    for item in _get(response, "output") or []:
        kind = _get(item, "type")
        if kind == "function_call":
            tool_uses.append((_get(item, "call_id"), _get(item, "name") or "tool", _get(item, "arguments")))
        elif kind == "message":
            texts.extend(_get(part, "text") or "" for part in _get(item, "content") or [] if _get(part, "type") == "output_text")
    content = "".join(texts) or None
    output: Any = {"content": content, "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in tool_uses]} if tool_uses else content
    status = _get(response, "status")
    if error is None and status == "failed":
        failure = _get(response, "error")
        error = RuntimeError(_get(failure, "message") or "response failed")
    call.finish(_get(response, "model"), usage_t, output, tool_uses, {"status": status, "response_id": _get(response, "id")}, error)


_RESPONSE_DONE = ("response.completed", "response.failed", "response.incomplete")


def _responses_event(call: _LLMCall, event: Any) -> None:
    kind = _get(event, "type")
    if kind in _RESPONSE_DONE or kind == "response.created":
        call.stream_state["response"] = _get(event, "response")


def _responses_stream_done(call: _LLMCall, error: Optional[BaseException]) -> None:
    response = call.stream_state.get("response")
    if response is None:
        call.finish(None, (None, None, None), None, [], {}, error)
    else:
        _responses_result(call, response, error)


def _anthropic_result(call: _LLMCall, response: Any, error: Optional[BaseException] = None) -> None:
    usage = _get(response, "usage")
    tool_uses, texts = [], []
    for block in _get(response, "content") or []:
        kind = _get(block, "type")
        if kind == "tool_use":
            tool_uses.append((_get(block, "id"), _get(block, "name") or "tool", _get(block, "input")))
        elif kind == "text":
            texts.append(_get(block, "text") or "")
    content = "".join(texts) or None
    output: Any = {"content": content, "tool_uses": [{"id": i, "name": n, "input": _jsonable(a)} for i, n, a in tool_uses]} if tool_uses else content
    call.finish(_get(response, "model"), _anthropic_usage(usage), output, tool_uses,
                {"stop_reason": _get(response, "stop_reason"), "response_id": _get(response, "id")}, error)


def _anthropic_usage(usage: Any) -> tuple[Any, Any, Any]:
    """(input, output, cached) of a Messages usage: every prompt token is input, cached ones included."""
    u = _plain(usage)
    if not isinstance(u, dict):
        return None, None, None
    n = _wire.anthropic_usage(u)
    return n["input_tokens"], n["output_tokens"], n["cached_input_tokens"]


def _anthropic_chunk(call: _LLMCall, event: Any) -> None:
    st = call.stream_state
    kind = _get(event, "type")
    if kind == "message_start":
        message = _get(event, "message")
        st["model"], st["id"] = _get(message, "model"), _get(message, "id")
        st["usage_start"] = _get(message, "usage")
    elif kind == "content_block_start":
        block = _get(event, "content_block")
        st.setdefault("blocks", {})[_get(event, "index", 0)] = {
            "type": _get(block, "type"), "id": _get(block, "id"), "name": _get(block, "name"), "text": "", "json": ""}
    elif kind == "content_block_delta":
        delta = _get(event, "delta")
        entry = st.setdefault("blocks", {}).setdefault(_get(event, "index", 0), {"type": "text", "id": None, "name": None, "text": "", "json": ""})
        entry["text"] += _get(delta, "text") or ""
        entry["json"] += _get(delta, "partial_json") or ""
    elif kind == "message_delta":
        st["output_tokens"] = _get(_get(event, "usage"), "output_tokens")
        st["stop_reason"] = _get(_get(event, "delta"), "stop_reason")


def _anthropic_stream_done(call: _LLMCall, error: Optional[BaseException]) -> None:
    st = call.stream_state
    inp, _, cached = _anthropic_usage(st.get("usage_start"))
    tool_uses, texts = [], []
    for _, block in sorted(st.get("blocks", {}).items()):
        if block["type"] == "tool_use":
            tool_uses.append((block["id"], block["name"] or "tool", block["json"]))
        else:
            texts.append(block["text"])
    content = "".join(texts) or None
    output: Any = {"content": content, "tool_uses": [{"id": i, "name": n, "input": a} for i, n, a in tool_uses]} if tool_uses else content
    call.finish(st.get("model"), (inp, st.get("output_tokens"), cached), output, tool_uses,
                {"stop_reason": st.get("stop_reason"), "response_id": st.get("id")}, error)


class _StreamProxy:
    """Wraps a provider's sync stream: passes every item through, records the call when exhausted."""

    def __init__(self, stream: Any, call: _LLMCall, on_item: Callable, on_done: Callable):
        self._stream, self._call, self._on_item, self._on_done = stream, call, on_item, on_done
        self._done = False
        self._iterator: Any = None

    def _finish(self, error: Optional[BaseException] = None) -> None:
        if not self._done:
            self._done = True
            try:
                self._on_done(self._call, error)
            except Exception:
                pass

    def __iter__(self) -> "_StreamProxy":
        return self

    def __next__(self) -> Any:
        try:
            if self._iterator is None:
                self._iterator = self._stream if hasattr(self._stream, "__next__") else iter(self._stream)
            item = next(self._iterator)
        except StopIteration:
            self._finish()
            raise
        except BaseException as exc:
            self._finish(exc)
            raise
        try:
            self._on_item(self._call, item)
        except Exception:
            pass
        return item

    def __enter__(self) -> "_StreamProxy":
        enter = getattr(self._stream, "__enter__", None)
        if enter:
            enter()
        return self

    def __exit__(self, *exc: Any) -> Any:
        self._finish()
        exit_ = getattr(self._stream, "__exit__", None)
        return exit_(*exc) if exit_ else False

    def close(self) -> None:
        self._finish()
        close = getattr(self._stream, "close", None)
        if close:
            close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _AsyncStreamProxy(_StreamProxy):
    def __aiter__(self) -> "_AsyncStreamProxy":
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._stream.__anext__()
        except StopAsyncIteration:
            self._finish()
            raise
        except BaseException as exc:
            self._finish(exc)
            raise
        try:
            self._on_item(self._call, item)
        except Exception:
            pass
        return item

    async def __aenter__(self) -> "_AsyncStreamProxy":
        enter = getattr(self._stream, "__aenter__", None)
        if enter:
            await enter()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        self._finish()
        exit_ = getattr(self._stream, "__aexit__", None)
        return await exit_(*exc) if exit_ else False

    async def close(self) -> None:  # type: ignore[override]
        self._finish()
        close = getattr(self._stream, "close", None)
        if close:
            result = close()
            if inspect.isawaitable(result):
                await result


def _wrap_create(original: Callable, provider: str, tool: str, on_result: Callable, on_chunk: Callable, on_stream_done: Callable) -> Callable:
    def finish_value(call: _LLMCall, value: Any, streaming: bool, is_async: bool) -> Any:
        if streaming:
            proxy = _AsyncStreamProxy if (is_async or hasattr(value, "__anext__")) else _StreamProxy
            return proxy(value, call, on_chunk, on_stream_done)
        try:
            on_result(call, value)
        except Exception:
            pass
        return value

    @functools.wraps(original)
    def create_traced(*args: Any, **kwargs: Any) -> Any:
        tracer = get_tracer()
        if not tracer.enabled or _in_stream_helper.get():
            return original(*args, **kwargs)
        try:
            call = _LLMCall(tracer, provider, tool, kwargs)
        except Exception:
            return original(*args, **kwargs)
        streaming = bool(kwargs.get("stream"))
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            call.finish(None, (None, None, None), None, [], {}, exc)
            raise
        if inspect.isawaitable(result):
            async def finish_async() -> Any:
                try:
                    value = await result
                except BaseException as exc:
                    call.finish(None, (None, None, None), None, [], {}, exc)
                    raise
                return finish_value(call, value, streaming, True)

            return finish_async()
        return finish_value(call, result, streaming, False)

    create_traced.__svc_traced__ = True  # type: ignore[attr-defined]
    return create_traced


class _StreamManagerProxy:
    """Wraps a provider's stream helper (`with client.messages.stream(...) as stream:`, sync or
    async): the block gets the provider's own stream object; the call is recorded when the block
    exits, from what that stream accumulated (however it was read: events, text, final message)."""

    def __init__(self, manager: Any, call: _LLMCall, on_done: Callable[[_LLMCall, Any, Optional[BaseException]], None]):
        self._manager, self._call, self._on_done = manager, call, on_done
        self._stream: Any = None
        self._done = False

    def _finish(self, error: Optional[BaseException]) -> None:
        if not self._done:
            self._done = True
            try:
                self._on_done(self._call, self._stream, error)
            except Exception:
                pass

    def __enter__(self) -> Any:
        token = _in_stream_helper.set(True)
        try:
            self._stream = self._manager.__enter__()
        except BaseException as exc:
            self._finish(exc)
            raise
        finally:
            _in_stream_helper.reset(token)
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        self._finish(exc)
        return self._manager.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> Any:
        token = _in_stream_helper.set(True)
        try:
            self._stream = await self._manager.__aenter__()
        except BaseException as exc:
            self._finish(exc)
            raise
        finally:
            _in_stream_helper.reset(token)
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        self._finish(exc)
        return await self._manager.__aexit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)


def _wrap_stream(original: Callable, provider: str, tool: str, on_done: Callable) -> Callable:
    @functools.wraps(original)
    def stream_traced(*args: Any, **kwargs: Any) -> Any:
        tracer = get_tracer()
        if not tracer.enabled:
            return original(*args, **kwargs)
        try:
            call = _LLMCall(tracer, provider, tool, {**kwargs, "stream": True})
        except Exception:
            return original(*args, **kwargs)
        token = _in_stream_helper.set(True)
        try:
            manager = original(*args, **kwargs)
        except BaseException as exc:
            call.finish(None, (None, None, None), None, [], {}, exc)
            raise
        finally:
            _in_stream_helper.reset(token)
        return _StreamManagerProxy(manager, call, on_done)

    stream_traced.__svc_traced__ = True  # type: ignore[attr-defined]
    return stream_traced


def _anthropic_stream_manager_done(call: _LLMCall, stream: Any, error: Optional[BaseException]) -> None:
    try:
        message = stream.current_message_snapshot if stream is not None else None
    except Exception:  # nothing read yet
        message = None
    if message is None:
        call.finish(None, (None, None, None), None, [], {}, error)
        return
    _anthropic_result(call, message, error if _get(message, "stop_reason") is None else None)


def _responses_stream_manager_done(call: _LLMCall, stream: Any, error: Optional[BaseException]) -> None:
    state = getattr(stream, "_state", None)
    response = getattr(state, "_completed_response", None)
    if response is None:
        call.finish(None, (None, None, None), None, [], {}, error)
    else:
        _responses_result(call, response)


def _patch(owner: Any, name: str, wrapped: Callable[[Callable], Callable]) -> None:
    original = getattr(owner, name)
    if not getattr(original, "__svc_traced__", False):
        setattr(owner, name, wrapped(original))


def wrap_openai(client: Any) -> Any:
    """Instrument an `openai.OpenAI` / `AsyncOpenAI` client in place (returns it):
    `chat.completions.create`, and the Responses API's `responses.create` and `responses.stream`.
    Streams (`stream=True`) are recorded when fully consumed; a chat stream has token counts only
    with `stream_options={"include_usage": True}` (without them its cost is recorded as unknown)."""
    try:
        _patch(client.chat.completions, "create", lambda original: _wrap_create(
            original, "openai", "openai.chat.completions.create", _openai_result, _openai_chunk, _openai_stream_done))
    except Exception as exc:  # an unexpected client shape: leave it untouched
        print(f"svc tracing: cannot wrap {type(client).__name__}: {exc}", file=sys.stderr)
    responses = getattr(client, "responses", None)  # absent from openai < 1.66
    if responses is not None:
        try:
            _patch(responses, "create", lambda original: _wrap_create(
                original, "openai", "openai.responses.create", _responses_result, _responses_event, _responses_stream_done))
            if hasattr(responses, "stream"):
                _patch(responses, "stream", lambda original: _wrap_stream(
                    original, "openai", "openai.responses.stream", _responses_stream_manager_done))
        except Exception as exc:
            print(f"svc tracing: cannot wrap {type(client).__name__}.responses: {exc}", file=sys.stderr)
    return client


def wrap_anthropic(client: Any) -> Any:
    """Instrument an `anthropic.Anthropic` / `AsyncAnthropic` client in place (returns it):
    `messages.create` (`stream=True` streams are recorded when consumed) and `messages.stream`
    (recorded when its `with` / `async with` block exits)."""
    try:
        _patch(client.messages, "create", lambda original: _wrap_create(
            original, "anthropic", "anthropic.messages.create", _anthropic_result, _anthropic_chunk, _anthropic_stream_done))
        if hasattr(client.messages, "stream"):
            _patch(client.messages, "stream", lambda original: _wrap_stream(
                original, "anthropic", "anthropic.messages.stream", _anthropic_stream_manager_done))
    except Exception as exc:
        print(f"svc tracing: cannot wrap {type(client).__name__}: {exc}", file=sys.stderr)
    return client
