"""The data side of the run view: the first load (run, trace, audit log, diff, trajectory, effects) and the
live feed while a run is running (the sandbox lifecycle stream with trace and audit events, the
run stream with invariant results and `done`), applied in batches every FLUSH_S so 100
events/s stay smooth. Mixed into RunScreen, which owns the widgets it fills."""
from __future__ import annotations

from typing import TYPE_CHECKING

from client.api import ApiError, DaemonUnreachable
from tui import format as f
from tui.data import (TERMINAL_RUN, AuditRow, agent_output_rows, InvariantRow, RunInfo, TraceItem, diff_entries, event_key, event_time,
                      trace_events, verdict)
from tui.widgets.keyed_table import KeyedTable

if TYPE_CHECKING:
    from daemon.contract.runs import InvariantResult
    from daemon.contract.sandboxes import SandboxEvent
    from tui.data import Violation
    from tui.screens.base import SvcScreen as FeedHost
    from tui.widgets.audit_log import AuditLog
    from tui.widgets.span_tree import SpanTree
else:
    FeedHost = object

FLUSH_S = 0.1


class RunFeed(FeedHost):
    """Mixed into RunScreen, a SvcScreen (guard, poll, run_worker), which sets this state in its
    __init__ and holds the widgets and renderers below."""

    run_id: str | None
    sandbox_id: str | None
    spec_id: str | None
    trace_ids: list[str]
    status: str
    info: RunInfo | None
    invariants: list[InvariantRow]
    violations: list[Violation]
    reproducer: str | None
    follow: bool
    _pending_trace: list[TraceItem]
    _pending_audit: list[dict]
    _sandbox_stream: bool
    _run_stream: bool
    _trace_loaded: bool
    _trace_failed: bool
    _final: bool
    _seen: set[str]
    _last_ts: str | None

    if TYPE_CHECKING:
        @property
        def span_tree(self) -> SpanTree: ...

        @property
        def audit(self) -> AuditLog: ...

        def render_side(self) -> None: ...

        def render_summary(self) -> None: ...

    # --- loading ------------------------------------------------------------------------------------
    def poll(self, force: bool = False) -> None:
        if self._final and not force:
            return  # a finished run does not change
        super().poll(force)

    async def load(self) -> None:
        first = not self._trace_loaded
        if self.run_id:
            info = await self.guard(self.backend.run(self.run_id), quiet_404=True)
            if info is not None:
                self.absorb_run(info)
        if first or not self._sandbox_stream:
            events = await self.guard(self.fetch_trace(since=None if first else self._last_ts), quiet_404=True)
            self._trace_failed = events is None and not self._trace_loaded
            if events is not None:
                fresh = self._unseen(events)
                if first:
                    self.span_tree.load(fresh)
                    self._trace_loaded = True
                else:
                    self._pending_trace.extend(fresh)
        if self.terminal:
            if not self._final:
                await self.load_final()
            elif self.effects is None and self.effects_unreached and self.run_id:
                await self.load_effects()  # svcd is back
        elif self.follow:
            self.start_following()
        self.render_side()

    async def fetch_trace(self, since: str | None = None) -> list[TraceItem]:
        if self.run_id:
            events = await self.backend.trace_events(run_id=self.run_id, since=since)
            if self.sandbox_id:  # events an agent sent to its sandbox's endpoint carry no run id
                events += await self.backend.trace_events(sandbox_id=self.sandbox_id, since=since)
            return events
        if self.trace_ids:
            events: list[TraceItem] = []
            for trace_id in self.trace_ids:
                events.extend(await self.backend.trace_events(trace_id=trace_id))
            return events
        if self.sandbox_id:
            return await self.backend.trace_events(sandbox_id=self.sandbox_id, since=since)
        return []

    async def load_final(self) -> None:
        """Audit log and workspace diff of a finished run: from its trajectory, else its sandbox."""
        trajectory = None
        if self.info is not None and self.info.trajectory_url:
            trajectory = await self.guard(self.backend.trajectory(self.info.trajectory_url), quiet_404=True)
        if trajectory:
            audit = [AuditRow.parse(e, i) for i, e in enumerate(trajectory.get("audit_events") or []) if isinstance(e, dict)]
            if not any(row.type == "stdout" for row in audit):  # the agent's output, under the stdout filter too
                audit += agent_output_rows(trajectory.get("agent"), len(audit))
            self.audit.load(audit)
            self.show_diff(diff_entries(trajectory.get("workspace_changes") or []))
            if not self.span_tree.index.spans and trajectory.get("trace_events"):
                self.span_tree.load(self._unseen(trace_events(trajectory["trace_events"])))
        elif self.sandbox_id:
            rows = await self.guard(self.backend.audit(self.sandbox_id), quiet_404=True)
            if rows is not None and (rows or not self.audit.events):
                self.audit.load(rows)
            diff = await self.guard(self.backend.diff(self.sandbox_id), quiet_404=True)
            if diff is not None:
                self.show_diff(diff)
        self._final = self.info is None or self.info.terminal
        if self.run_id and self.effects is None and self.info is not None and self.info.terminal:
            await self.load_effects()

    async def load_effects(self) -> None:
        """The finished run's effect ledger; when there is none, the tab says why (no notification)."""
        from tui.backend import route_missing

        self.effects_state = "loading the effect ledger…"
        self.effects_unreached = False
        try:
            self.effects = await self.backend.effects(self.run_id)
        except DaemonUnreachable:
            self.effects_state = "The effect ledger was not loaded (svcd did not answer); it loads when svcd is back."
            self.effects_unreached = True
            self.app.lost_connection()
        except ApiError as exc:
            self.effects_state = ("This svcd has no effect ledger (an older version)." if route_missing(exc)
                                  else f"No effects to show: {exc.body.get('message') or exc}")

    def show_diff(self, entries: list) -> None:
        self.diff = list(entries)
        self.query_one("#diff-table", KeyedTable).sync(
            [(f"{e.change}{e.path}", (e.change, e.path, f.bytes_(e.size))) for e in entries])

    def _unseen(self, events: list[TraceItem]) -> list[TraceItem]:
        fresh = []
        for event in events:
            key = event_key(event)
            if key in self._seen:
                continue
            self._seen.add(key)
            fresh.append(event)
            ts = event_time(event)
            if ts > (self._last_ts or ""):
                self._last_ts = ts
        return fresh

    def absorb_run(self, info: RunInfo) -> None:
        self.info = info
        self.status = info.status or self.status
        self.sandbox_id = self.sandbox_id or info.sandbox_id
        self.invariants = info.invariants or self.invariants
        self.violations = info.violations or self.violations
        self.reproducer = info.reproducer or self.reproducer
        self.spec_id = self.spec_id or info.spec_id

    @property
    def terminal(self) -> bool:
        return verdict(self.status) in TERMINAL_RUN

    # --- live ---------------------------------------------------------------------------------------
    def start_following(self) -> None:
        if self.sandbox_id and not self._sandbox_stream:
            self._sandbox_stream = True
            self.run_worker(self._follow_sandbox(), group="follow-sandbox", exclusive=True, exit_on_error=False)
        if self.run_id and not self._run_stream:
            self._run_stream = True
            self.run_worker(self._follow_run(), group="follow-run", exclusive=True, exit_on_error=False)

    @property
    def _following(self) -> bool:
        return self._sandbox_stream or self._run_stream

    def streams_live(self) -> bool:
        """Both streams up: the lifecycle stream brings trace, audit and status, the run stream the
        invariant results and `done` (which reloads the run as stored)."""
        return self._sandbox_stream and self._run_stream

    async def _follow_sandbox(self) -> None:
        try:
            async for message in self.backend.sandbox_events(self.sandbox_id):
                self.take(message)
        except DaemonUnreachable:
            self.app.lost_connection()
        except ApiError as exc:
            if exc.status != 404:
                self.app.report_error(exc, "lifecycle stream")
        finally:
            self._sandbox_stream = False

    async def _follow_run(self) -> None:
        try:
            async for event in self.backend.run_stream(self.run_id):
                # tool calls come with the trace (lifecycle stream, else the poll of stored events)
                if event.invariant is not None:
                    self._merge_invariant(event.invariant)
                elif event.type == "done":
                    self.poll(force=True)  # the run as stored: its verdict, results, audit log, diff
                elif event.message is not None:
                    self.notify(event.message, title="run error", severity="error")
        except DaemonUnreachable:
            self.app.lost_connection()
        except ApiError as exc:
            if exc.status != 404:
                self.app.report_error(exc, "run stream")
        finally:
            self._run_stream = False

    def take(self, event: SandboxEvent) -> None:
        """One lifecycle-stream event: a trace event (a stored TraceEvent), an audit line or a status step."""
        if event.event_type == "trace":
            self._pending_trace.extend(self._unseen(trace_events([event.data])))
        elif event.event_type == "audit":
            self._pending_audit.append(event.data)
        elif event.event_type == "status":
            self.render_summary()

    def flush(self) -> None:
        """Apply queued live events in one batch (every FLUSH_S)."""
        if self._pending_trace:
            batch, self._pending_trace = self._pending_trace, []
            self.span_tree.add_events(batch)
        if self._pending_audit:
            batch, self._pending_audit = self._pending_audit, []
            start = len(self.audit.events)
            self.audit.append([AuditRow.parse(e, start + i) for i, e in enumerate(batch)])
        self.render_summary()

    def _merge_invariant(self, result: InvariantResult) -> None:
        name = result.invariant_id
        row = InvariantRow.of(result, name)
        self.invariants = [i for i in self.invariants if i.name != name] + [row]
        self.render_side()

    def on_reconnected(self) -> None:
        self._sandbox_stream = self._run_stream = False
        super().on_reconnected()

