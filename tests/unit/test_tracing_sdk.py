"""The tracing SDK on its own: decorator, nesting, routing, batching, failure handling, exit flush,
Unix sockets and the single-file drop-in. A small stdlib HTTP collector stands in for the daemon."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from client import tracing
from client.tracing import sdk
from tests.support.tracing import Collector

REPO = Path(__file__).resolve().parents[2]
WIRE = REPO / "daemon" / "sandbox" / "programs" / "provider_wire.py"


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture
def tracer(collector):
    t = tracing.configure(base_url=collector.url, api_key="svc_live_testkey", env={})
    yield t
    tracing.configure(env={})  # disabled again for other tests


def spans_by_name(events: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in events:
        out.setdefault(e["tool"], []).append(e)
    return out


def test_decorator_sync_nesting_input_output_and_errors(tracer, collector):
    @tracing.trace
    def outer(task: str, n: int = 2) -> dict:
        inner(n)
        try:
            failing()
        except ValueError:
            pass
        return {"done": task}

    @tracing.trace(name="inner-step", event_type="tool_call")
    def inner(n):
        return list(range(n))

    @tracing.trace
    def failing():
        raise ValueError("bad input")

    assert outer("write", n=3) == {"done": "write"}
    assert tracing.flush()
    spans = spans_by_name(collector.events)
    assert set(spans) == {"test_decorator_sync_nesting_input_output_and_errors.<locals>.outer", "inner-step",
                          "test_decorator_sync_nesting_input_output_and_errors.<locals>.failing"}
    outer_start, outer_end = spans[next(k for k in spans if k.endswith("outer"))]
    assert outer_start["phase"] == "start" and outer_end["phase"] == "end"
    assert json.loads(outer_start["input"]) == {"task": "write", "n": 3}
    assert json.loads(outer_end["output"]) == {"done": "write"} and outer_end["status"] == "ok"
    assert outer_end["duration_ms"] >= 0 and "parent_span_id" not in outer_start
    assert outer_start["trace_id"].startswith("trace-") and outer_start["span_id"].startswith("span_")
    inner_start, inner_end = spans["inner-step"]
    assert inner_start["event_type"] == "tool_call" and inner_start["parent_span_id"] == outer_start["span_id"]
    assert inner_start["trace_id"] == outer_start["trace_id"] and inner_start["root_span_id"] == outer_start["span_id"]
    assert json.loads(inner_end["output"]) == [0, 1, 2]
    fail_end = spans[next(k for k in spans if k.endswith("failing"))][1]
    assert fail_end["status"] == "error" and fail_end["error_type"] == "ValueError" and fail_end["output"] == "ValueError: bad input"
    assert collector.requests[0]["path"] == "/v1/traces"
    assert collector.requests[0]["headers"]["Authorization"] == "Bearer svc_live_testkey"


def test_decorator_async_and_concurrent_tasks_nest_separately(tracer, collector):
    @tracing.trace("step")
    async def step(i):
        await asyncio.sleep(0.01)
        return i

    @tracing.trace("run")
    async def run():
        return await asyncio.gather(step(1), step(2))

    class Agent:
        @tracing.trace
        async def act(self, x):
            raise KeyError(x)

    assert asyncio.run(run()) == [1, 2]
    with pytest.raises(KeyError):
        asyncio.run(Agent().act("k"))
    tracing.flush()
    spans = spans_by_name(collector.events)
    run_start = spans["run"][0]
    steps = [e for e in spans["step"] if e["phase"] == "start"]
    assert len(steps) == 2 and {e["parent_span_id"] for e in steps} == {run_start["span_id"]}
    act_start, act_end = spans["test_decorator_async_and_concurrent_tasks_nest_separately.<locals>.Agent.act"]
    assert json.loads(act_start["input"]) == {"x": "k"}  # self is not captured
    assert act_end["status"] == "error" and act_end["error_type"] == "KeyError"


def test_span_and_tool_call_context_managers_and_record_tool_call(tracer, collector):
    with tracing.span("agent", input={"task": "t"}) as root:
        with tracing.tool_call("grep", {"pattern": "x"}) as t:
            t.set_output(["a.py"])
            with tracing.span("inner") as inner:
                inner.set_metadata(note="deep")
        with pytest.raises(RuntimeError):
            with tracing.tool_call("rm"):
                raise RuntimeError("permission denied")
        tracing.record_tool_call("ls", input={"path": "/"}, output=["bin"], duration_ms=12)
        tracing.record_tool_call("cat", input="x", error=FileNotFoundError("x"))
        root.set_output("finished")
    tracing.flush()
    spans = spans_by_name(collector.events)
    root_id = spans["agent"][0]["span_id"]
    assert spans["grep"][0]["event_type"] == "tool_call" and spans["grep"][0]["parent_span_id"] == root_id
    assert json.loads(spans["grep"][1]["output"]) == ["a.py"]
    assert spans["inner"][0]["parent_span_id"] == spans["grep"][0]["span_id"]
    assert spans["inner"][1]["metadata"] == {"note": "deep"}
    rm_end = spans["rm"][1]
    assert rm_end["status"] == "error" and rm_end["error_type"] == "tool_error" and "permission denied" in rm_end["output"]
    (ls,) = spans["ls"]
    assert ls["phase"] == "complete" and ls["duration_ms"] == 12 and ls["parent_span_id"] == root_id and ls["status"] == "ok"
    (cat,) = spans["cat"]
    assert cat["status"] == "error" and cat["error_type"] == "tool_error" and "FileNotFoundError" in cat["output"]
    assert spans["agent"][1]["output"] == "finished"


def test_routing_by_environment(collector):
    base = {"SERVICE_BASE_URL": collector.url}
    sandboxed = tracing.Tracer(env={**base, "SERVICE_SANDBOX_ID": "sb-1", "SERVICE_SANDBOX_TOKEN": "svc_sb_tok", "SERVICE_API_KEY": "svc_live_k",
                                    "SERVICE_RUN_ID": "run_1", "SERVICE_AGENT": "bot"})
    assert sandboxed.enabled and sandboxed.exporter.path == "/v1/sandboxes/sb-1/trace"
    assert sandboxed.exporter.headers["Authorization"] == "Bearer svc_sb_tok"
    key_only = tracing.Tracer(env={**base, "SERVICE_SANDBOX_ID": "sb-2", "SERVICE_API_KEY": "svc_live_k"})
    assert key_only.exporter.path == "/v1/sandboxes/sb-2/trace" and key_only.exporter.headers["Authorization"] == "Bearer svc_live_k"
    api = tracing.Tracer(env={**base, "SERVICE_API_KEY": "svc_live_k"})
    assert api.exporter.path == "/v1/traces"
    nothing = tracing.Tracer(env=base)
    assert not nothing.enabled and nothing.exporter is None
    bad = tracing.Tracer(env={"SERVICE_BASE_URL": "ftp://nope", "SERVICE_API_KEY": "k"})
    assert not bad.enabled and "SERVICE_BASE_URL" in bad.error
    # inside a sandbox, top-level spans of one process share a trace; stamps ride on every event
    a = sdk.SpanHandle(sandboxed, "a", "span", None)
    b = sdk.SpanHandle(sandboxed, "b", "span", None)
    assert a.trace_id == b.trace_id
    sandboxed.emit({"event_type": "span", "tool": "x"})
    sandboxed.flush()
    event = collector.events[-1]
    assert event["run_id"] == "run_1" and event["agent"] == "bot" and collector.requests[-1]["path"] == "/v1/sandboxes/sb-1/trace"
    assert sdk.SpanHandle(api, "c", "span", None).trace_id != sdk.SpanHandle(api, "d", "span", None).trace_id


def test_disabled_tracing_is_a_no_op():
    tracing.configure(env={})
    calls = []

    @tracing.trace
    def f(x):
        calls.append(x)
        return x * 2

    assert f(2) == 4 and calls == [2]
    with tracing.span("s") as s:
        s.set_output(1)
    with tracing.tool_call("t") as t:
        t.set_output(2)
    tracing.record_tool_call("x")
    assert tracing.flush() and tracing.get_tracer().stats == {}


def test_queue_is_bounded_drops_oldest_and_never_blocks(collector):
    t = tracing.Tracer(base_url=collector.url, api_key="k", env={}, max_queue=100, batch_size=50, interval_s=5)
    # Hold the exporter's lock (re-entrant) so nothing drains while we overfill: an emit that waited
    # for room would never return here, so getting past the loop shows emit never blocks.
    with t.exporter.cond:
        for i in range(300):
            t.emit({"event_type": "span", "tool": "x", "i": i})
        assert len(t.exporter.queue) == 100 and t.exporter.stats["dropped"] == 200
    assert t.flush(timeout=10)
    assert [e["i"] for e in collector.events] == list(range(200, 300))  # the oldest went first
    assert t.stats["sent"] == 100 and len(collector.requests) == 2  # batches of 50


def test_daemon_down_or_rejecting_never_raises(collector):
    down = tracing.Tracer(base_url="http://127.0.0.1:9", api_key="k", env={}, retries=1)

    @tracing.trace
    def work():
        return 1

    down.emit({"event_type": "span", "tool": "x"})
    assert down.flush(timeout=10)
    assert down.stats["failed"] == 1 and down.stats["sent"] == 0 and down.exporter.last_error
    collector.status = 400
    rejecting = tracing.Tracer(base_url=collector.url, api_key="k", env={})
    rejecting.emit({"event_type": "span", "tool": "x"})
    assert rejecting.flush(timeout=10) and rejecting.stats["failed"] == 1
    assert work() == 1


def test_unix_socket_transport(tmp_path):
    path = str(tmp_path / "svcd.sock")
    unix = Collector(unix_path=path)
    try:
        t = tracing.Tracer(env={"SERVICE_BASE_URL": f"unix://{path}", "SERVICE_API_KEY": "svc_live_u"})
        for i in range(3):
            t.emit({"event_type": "span", "tool": f"u{i}"})
        assert t.flush(timeout=10)
        assert [e["tool"] for e in unix.events] == ["u0", "u1", "u2"]
        assert unix.requests[0]["headers"]["Authorization"] == "Bearer svc_live_u"
    finally:
        unix.close()


AGENT = """
import sys
sys.path.insert(0, {path!r})
from {module} import trace

@trace
def step(i):
    return i * i

for i in range(5):
    step(i)
# no flush: the atexit hook sends what is queued
"""


@pytest.mark.parametrize("drop_in", [False, True])
def test_flush_at_exit_and_single_file_drop_in(collector, tmp_path, drop_in):
    if drop_in:
        shutil.copy(Path(sdk.__file__), tmp_path / "svc_tracing.py")
        shutil.copy(WIRE, tmp_path / "provider_wire.py")  # shipped beside it (daemon/traces/sandbox_ext.py)
        code = AGENT.format(path=str(tmp_path), module="svc_tracing")
        cwd = tmp_path
    else:
        code = AGENT.format(path=str(REPO), module="client.tracing")
        cwd = REPO
    env = {"PATH": os.environ.get("PATH", ""), "SERVICE_BASE_URL": collector.url, "SERVICE_API_KEY": "svc_live_x"}
    # -I: isolated mode, no site-packages from the venv: the SDK needs only the standard library
    result = subprocess.run([sys.executable, "-I", "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    events = collector.events
    assert len(events) == 10 and {e["phase"] for e in events} == {"start", "end"}


def test_truncation_and_unserialisable_values(tracer, collector):
    class Weird:
        def __repr__(self):
            return "<weird>"

    @tracing.trace
    def big(blob, obj):
        return "é" * 5000

    big("x" * 10_000, Weird())
    tracing.flush()
    start, end = collector.events
    assert len(start["input"].encode()) <= sdk.TEXT_LIMIT_BYTES and "truncated" in start["input"]
    assert len(end["output"].encode()) <= sdk.TEXT_LIMIT_BYTES and end["output"].endswith("bytes]")


def test_forked_child_traces_into_the_same_process_trace(collector, tmp_path):
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from client.tracing import trace

        @trace
        def step(who):
            return who

        step("parent")
        pid = os.fork()
        if pid == 0:
            step("child")
            sys.exit(0)  # atexit flushes the child's events
        os.waitpid(pid, 0)
    """)
    env = {"PATH": os.environ.get("PATH", ""), "SERVICE_BASE_URL": collector.url, "SERVICE_SANDBOX_ID": "sb-fork",
           "SERVICE_SANDBOX_TOKEN": "svc_sb_x"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    events = collector.events
    assert sorted(json.loads(e["output"]) for e in events if e["phase"] == "end") == ["child", "parent"]
    assert len({e["trace_id"] for e in events}) == 1
