"""The trace writer: one task, one SQLite connection on its own thread, group commit.

Ingest handlers validate their events, then `await writer.write(tenant, rows)`: the rows join a
queue; the writer takes everything queued (up to `max_rows`), resolves trace ids, root spans and
the `head` flag in arrival order, inserts it all with one `executemany` in one transaction and
commits before any of those requests is answered — so a 202 means the events are durable, and
concurrent requests share one commit. `await writer.flush()` waits for everything queued so far.

Resolution rules (DECISIONS "Traces"):
- an event with `trace_id` keeps it; otherwise it joins its own span's trace (an `end` after its
  `start`), else its parent's trace; a root span (no parent) starts a new trace;
- an event without trace_id whose parent is unknown is rejected (send trace_id, or the parent first);
- `root_span_id` comes from the event, the parent, or — for OTLP children exported before their
  parent — is filled in when the trace's root arrives (one root per trace is assumed then);
- `head` = 1 on the first row stored for a span, so span listings show each span once.
"""
from __future__ import annotations

import asyncio
import logging
import operator
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from daemon.store import traces as trace_store
from daemon.store.traces import CHUNK_ROWS, COLUMNS, insert_rows  # noqa: F401 (re-exported)
from daemon.traces.ingest import new_trace_id

log = logging.getLogger("svcd.traces")

_ROW_VALUES = operator.itemgetter(*COLUMNS)
Row = dict[str, Any]


@dataclass
class Job:
    tenant_id: str
    rows: list[tuple[int, Row]]
    future: asyncio.Future
    result: tuple[list[Row], list[dict[str, Any]]] | None = None


@dataclass
class _Group:
    """All events of one span within a job."""

    items: list[tuple[int, Row]] = field(default_factory=list)
    trace: str | None = None
    root: str | None = None
    parent: str | None = None
    first_phase: str = ""
    head: int = 1

    @property
    def self_sufficient(self) -> bool:
        return self.trace is not None and (self.root is not None or self.parent is None)


class TraceWriter:
    def __init__(self, db_path: Path | str, max_rows: int = 20_000, cache_size: int = 200_000,
                 on_commit: Callable[[list[Row]], None] | None = None):
        self.db_path = str(db_path)
        self.max_rows = max_rows
        self.cache_size = cache_size
        self.on_commit = on_commit
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="svc-trace-writer")
        self.conn: sqlite3.Connection | None = None
        self.task: asyncio.Task | None = None
        # (tenant, span_id) -> (trace_id, root_span_id) of recently stored spans; insertion-ordered.
        self.spans: dict[tuple[str, str], tuple[str, str | None]] = {}
        # (tenant, trace_id) with stored rows whose root_span_id is still NULL -> those spans' ids.
        self.pending_traces: dict[tuple[str, str], list[str]] = {}
        self.stats = {"flushes": 0, "rows": 0, "analyzed": 0}
        self._analyzed_at = 0  # table size (max seq) when ANALYZE last ran
        self._max_seq = 0

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, self._open)
        self.task = asyncio.create_task(self._run(), name="svc-trace-writer")

    def _open(self) -> None:
        conn = trace_store.open_writer(self.db_path)
        self.conn = conn
        self._max_seq = trace_store.max_seq_sync(conn)
        if trace_store.has_statistics(conn):
            self._analyzed_at = self._max_seq
        elif self._max_seq:
            self._analyze()

    def _analyze(self) -> None:
        """Sampled statistics (a few ms) so SQLite knows tenant_id matches everything while span_id,
        run_id, ... match a few rows — also for other modules' queries on trace_events."""
        assert self.conn is not None
        try:
            trace_store.analyze(self.conn)
            self._analyzed_at = self._max_seq
            self.stats["analyzed"] += 1
        except sqlite3.Error:
            log.exception("ANALYZE trace_events failed")

    async def close(self) -> None:
        if self.task is not None:
            await self.flush()
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None
        if self.conn is not None:
            await asyncio.get_running_loop().run_in_executor(self.executor, self.conn.close)
            self.conn = None
        self.executor.shutdown(wait=True)

    # -- API -----------------------------------------------------------------------------------------

    async def write(self, tenant_id: str, rows: list[tuple[int, Row]]) -> tuple[list[Row], list[dict[str, Any]]]:
        """Store `rows` ([(index in the request, row)]); returns (stored rows, per-event errors)
        once they are committed."""
        if not rows:
            return [], []
        if self.task is None or self.task.done():
            raise RuntimeError("trace writer is not running")
        job = Job(tenant_id, rows, asyncio.get_running_loop().create_future())
        self.queue.put_nowait(job)
        return await asyncio.shield(job.future)

    async def flush(self) -> None:
        """Wait until everything queued before this call is committed."""
        if self.task is None or self.task.done():
            return
        job = Job("", [], asyncio.get_running_loop().create_future())
        self.queue.put_nowait(job)
        await asyncio.shield(job.future)

    # -- the writer task -----------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = await self.queue.get()
            jobs, count = [job], len(job.rows)
            while count < self.max_rows and not self.queue.empty():
                more = self.queue.get_nowait()
                jobs.append(more)
                count += len(more.rows)
            try:
                await loop.run_in_executor(self.executor, self._flush_sync, jobs)
            except Exception as exc:  # the requests answer 500; the log has the cause
                log.exception("trace flush failed (%d events)", count)
                for j in jobs:
                    if not j.future.done():
                        j.future.set_exception(exc)
                continue
            stored_all: list[Row] = []
            for j in jobs:
                if not j.future.done():
                    j.future.set_result(j.result or ([], []))
                if j.result:
                    stored_all.extend(j.result[0])
            if stored_all and self.on_commit is not None:
                try:
                    self.on_commit(stored_all)
                except Exception:
                    log.exception("trace on_commit hook failed")

    def _flush_sync(self, jobs: list[Job]) -> None:
        conn = self.conn
        assert conn is not None
        if not any(j.rows for j in jobs):
            for j in jobs:
                j.result = ([], [])
            return
        added: list[tuple[str, str]] = []
        fixups: list[tuple[str, str, str]] = []
        try:
            with trace_store.immediate(conn):
                seq = trace_store.max_seq_sync(conn)
                values = []
                for job in jobs:
                    stored, errors = self._resolve(conn, job.tenant_id, job.rows, added, fixups)
                    for row in stored:
                        seq += 1
                        row["seq"] = seq
                        row["tenant_id"] = job.tenant_id
                        values.append(_ROW_VALUES(row))
                    job.result = (stored, errors)
                if values:
                    insert_rows(conn, values)
                for tenant_id, trace_id, root in fixups:
                    trace_store.fill_root(conn, tenant_id, trace_id, root)
        except BaseException:
            for key in added:
                self.spans.pop(key, None)
            raise
        for tenant_id, trace_id, root in fixups:
            for span_id in self.pending_traces.pop((tenant_id, trace_id), ()):
                key = (tenant_id, span_id)
                if key in self.spans:
                    self.spans[key] = (trace_id, root)
        self.stats["flushes"] += 1
        self.stats["rows"] += len(values)
        self._max_seq = seq
        # Refresh statistics at 10k rows and whenever the table has doubled (at least every 1M rows).
        grown = self._max_seq - self._analyzed_at
        if grown >= 10_000 and (grown >= self._analyzed_at or grown >= 1_000_000):
            self._analyze()
        overflow = len(self.spans) - self.cache_size
        if overflow > 0:
            for key in list(self.spans)[: overflow + self.cache_size // 10]:
                del self.spans[key]

    # -- resolution ------------------------------------------------------------------------------

    def _lookup(self, conn: sqlite3.Connection, tenant_id: str, span_id: str) -> tuple[str, str | None] | None:
        """(trace_id, root_span_id) of a stored span: the cache (kept current when roots are filled
        in), else the database."""
        hit = self.spans.get((tenant_id, span_id))
        if hit is not None:
            return hit
        found = trace_store.span_trace(conn, tenant_id, span_id)
        if found is None:
            return None
        self.spans[(tenant_id, span_id)] = found
        return found

    def _trace_root(self, conn: sqlite3.Connection, tenant_id: str, trace_id: str) -> str | None:
        return trace_store.trace_root(conn, tenant_id, trace_id)

    def _resolve(
        self,
        conn: sqlite3.Connection,
        tenant_id: str,
        items: list[tuple[int, Row]],
        added: list[tuple[str, str]],
        fixups: list[tuple[str, str, str]],
    ) -> tuple[list[Row], list[dict[str, Any]]]:
        groups: dict[str, _Group] = {}
        for index, row in items:
            group = groups.get(row["span_id"])
            if group is None:
                group = groups[row["span_id"]] = _Group(first_phase=row["phase"])
            group.items.append((index, row))
            if group.trace is None and row["trace_id"]:
                group.trace = row["trace_id"]
            if group.root is None and row["root_span_id"]:
                group.root = row["root_span_id"]
            if group.parent is None and row["parent_span_id"]:
                group.parent = row["parent_span_id"]

        resolved: dict[str, tuple[str, str | None]] = {}
        rejected: set[str] = set()

        def resolve_one(span_id: str) -> None:
            group = groups[span_id]
            # Is this span already stored (its start came in an earlier request)? The cache catches
            # duplicates; the database is asked only for an `end` whose start is not cached.
            known = self.spans.get((tenant_id, span_id))
            if known is None and group.first_phase == "end":
                known = self._lookup(conn, tenant_id, span_id)
            if known is not None:
                group.head = 0
                trace, root = group.trace or known[0], group.root or known[1]
                if root is None and group.parent is None:
                    root = span_id
            elif group.parent is None:
                trace, root = group.trace or new_trace_id(), group.root or span_id
            else:
                parent = resolved.get(group.parent) or self._lookup(conn, tenant_id, group.parent)
                if parent is not None:
                    trace, root = group.trace or parent[0], group.root or parent[1]
                elif group.trace is not None:
                    trace, root = group.trace, group.root
                else:
                    rejected.add(span_id)
                    return
            resolved[span_id] = (trace, root)

        for span_id in groups:
            if span_id in resolved or span_id in rejected:
                continue
            # Walk up to the first ancestor that can be resolved on its own, then resolve downwards.
            chain, seen, current = [span_id], {span_id}, span_id
            while True:
                group = groups[current]
                parent = group.parent
                if group.self_sufficient or parent is None or parent not in groups or parent in resolved or parent in rejected or parent in seen:
                    break
                chain.append(parent)
                seen.add(parent)
                current = parent
            for member in reversed(chain):
                if member not in resolved and member not in rejected:
                    resolve_one(member)

        # Roots not known yet (OTLP children before their parent): the trace's root, if it is known.
        pending: dict[str, list[str]] = {}
        roots: dict[str, str] = {}
        for span_id, (trace, root) in resolved.items():
            if root is None:
                pending.setdefault(trace, []).append(span_id)
            elif groups[span_id].parent is None:
                roots[trace] = root
            else:
                roots.setdefault(trace, root)
        for trace, members in pending.items():
            root = roots.get(trace) or self._trace_root(conn, tenant_id, trace)
            if root is not None:
                for span_id in members:
                    resolved[span_id] = (trace, root)
            else:
                waiting = self.pending_traces.setdefault((tenant_id, trace), [])
                if len(waiting) < 100_000:
                    waiting.extend(members)
        for trace, root in roots.items():
            if (tenant_id, trace) in self.pending_traces:
                fixups.append((tenant_id, trace, root))

        stored: list[Row] = []
        errors: list[dict[str, Any]] = []
        heads_done: set[str] = set()
        for index, row in items:
            span_id = row["span_id"]
            if span_id in rejected:
                errors.append({
                    "index": index,
                    "loc": f"events.{index}.parent_span_id",
                    "msg": f"parent span '{groups[span_id].parent}' is unknown: send trace_id with the event, or send the parent first",
                })
                continue
            trace, root = resolved[span_id]
            row["trace_id"], row["root_span_id"] = trace, root
            if groups[span_id].head and span_id not in heads_done:
                row["head"] = 1
                heads_done.add(span_id)
            else:
                row["head"] = 0
            stored.append(row)
        for span_id, value in resolved.items():
            key = (tenant_id, span_id)
            if key not in self.spans:
                added.append(key)
            self.spans[key] = value
        return stored, errors
