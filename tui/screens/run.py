"""One run (scenario): the live trace tree beside the audit stream, invariant results with evidence,
forbidden-rule violations pointing at the event that broke them, the workspace diff and the
reproducer. The loading and the live feed are in run_feed.py."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static, TabbedContent, TabPane

from client.routes import R
from tui import format as f
from tui.data import InvariantRow, RunInfo, ScenarioRow, TraceItem, Violation, verdict, violation_target
from tui.data.scores import ExperimentScoreView, span_scores
from tui.screens.base import SvcScreen
from tui.screens.run_feed import FLUSH_S, RunFeed
from tui.widgets.audit_log import AuditLog
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.run_text import checks_text, reproducer_text, span_detail
from tui.widgets.span_tree import SpanTree


class RunScreen(RunFeed, SvcScreen):
    CRUMB = "Run"
    HELP = "Trace tree (enter expands, n next error) beside the audit stream (a filters). y copies the reproducer."
    POLL_S = 2.0
    BINDINGS = [
        Binding("a", "audit_filter", "Audit filter"),
        Binding("v", "next_violation", "Violation"),
        Binding("y", "copy", "Copy repro"),
        Binding("r", "rerun", "Rerun"),
        Binding("F", "toggle_follow", "Follow", show=False),
        Binding("1", "tab('audit')", "Audit tab", show=False),
        Binding("2", "tab('checks')", "Checks tab", show=False),
        Binding("3", "tab('diff')", "Diff tab", show=False),
        Binding("4", "tab('repro')", "Repro tab", show=False),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, scenario: ScenarioRow | None = None, *, run_id: str | None = None, experiment_id: str | None = None,
                 spec_id: str | None = None, sandbox_id: str | None = None, trace_id: str | None = None) -> None:
        super().__init__()
        self.scenario = scenario
        self.run_id = run_id or (scenario.run_id if scenario else None)
        self.sandbox_id = sandbox_id or (scenario.sandbox_id if scenario else None)
        self.trace_ids = ([trace_id] if trace_id else []) or (list(scenario.trace_ids) if scenario else [])
        self.experiment_id = experiment_id
        self.spec_id = spec_id
        self.info: RunInfo | None = None
        self.invariants: list[InvariantRow] = list(scenario.invariants) if scenario else []
        self.violations: list[Violation] = list(scenario.violations) if scenario else []
        self.reproducer: str | None = scenario.reproducer if scenario else None
        self.status = scenario.status if scenario else "?"
        self.follow = True
        self._pending_trace: list[TraceItem] = []
        self._pending_audit: list[dict] = []
        self._violation_cursor = -1
        self._sandbox_stream = False
        self._run_stream = False
        self._trace_loaded = False
        self._final = False
        self._seen: set[str] = set()
        self.diff: list = []
        self._last_summary: Text | None = None
        self._last_ts: str | None = None
        self.scores: ExperimentScoreView | None = None  # the experiment's score rows, by span

    def crumb(self) -> str:
        return f"Run ▸ {self.run_id or self.sandbox_id or (self.trace_ids[0] if self.trace_ids else '?')}"

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="run-summary", classes="summary")
        with Horizontal(id="run-main"):
            with Vertical(id="run-left"):
                yield SpanTree(id="trace")
                yield Static("", id="span-detail", classes="detail")
            with TabbedContent(id="run-tabs", initial="audit"):
                with TabPane("Audit", id="audit"):
                    yield AuditLog(id="audit-log")
                with TabPane("Checks", id="checks"):
                    with VerticalScroll():
                        yield Static("", id="checks-body")
                with TabPane("Diff", id="diff"):
                    yield KeyedTable([("change", "", 1), ("path", "Path", 28), ("size", "Size", 6)], id="diff-table")
                with TabPane("Repro", id="repro"):
                    with VerticalScroll():
                        yield Static("", id="repro-body")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(FLUSH_S, self.flush)
        self.query_one(SpanTree).focus()
        self.app.theme_changed_signal.subscribe(self, lambda _t: self.render_side())
        if self.experiment_id:
            self.run_worker(self._load_scores(), group="scores", exit_on_error=False)

    async def _load_scores(self) -> None:
        body = await self.guard(self.backend.call(R.EXPERIMENT_SCORES, experiment_id=self.experiment_id), quiet_404=True)
        self.scores = ExperimentScoreView.of(body) if body is not None else None

    @property
    def span_tree(self) -> SpanTree:
        return self.query_one(SpanTree)

    @property
    def audit(self) -> AuditLog:
        return self.query_one(AuditLog)

    # --- rendering ----------------------------------------------------------------------------------
    def render_summary(self) -> None:
        variables = self.app.theme_variables
        totals = self.span_tree.index.totals
        text = Text()
        shown = verdict(self.status) if self.status not in ("?", "") else ("trace" if self.trace_ids else "…")
        text.append_text(f.styled(shown, variables, bold=True))
        info = self.info
        score = info.score if info else (self.scenario.score if self.scenario else None)
        text.append(f"  score {f.score(score)}")
        seed = (info.seed if info else None) or (self.scenario.seed if self.scenario else None)
        if seed:
            text.append(f"  seed {seed}")
        duration = (info.duration_ms if info else None) or (self.scenario.duration_ms if self.scenario else None)
        if duration:
            text.append(f"  {f.ms(duration)}")
        text.append(f"\n{len(self.span_tree.index):,} spans  {totals['llm_calls']} llm  {totals['tool_calls']} tools  "
                    f"{totals['input_tokens']:,}→{totals['output_tokens']:,} tok  {f.money(totals['cost_usd'])}")
        if totals["errors"]:
            text.append(f"  {totals['errors']} errors", style=f"bold {f.colour(variables, 'error')}")
        if self.run_id or self.sandbox_id:
            text.append(f"  {len(self.audit.events):,} audit", style="dim")
            if not self.terminal:
                text.append("  ● live" if self._following else "  ○ not following (F)", style=f.colour(variables, "accent"))
        summary = self.query_one("#run-summary", Static)
        if text != self._last_summary:  # fixed height (CSS): no layout pass for a new line of numbers
            self._last_summary = text
            summary.update(text, layout=False)

    def render_side(self) -> None:
        self.render_summary()
        self.show_trace_hint()
        self.query_one("#checks-body", Static).update(self.checks_text())
        self.query_one("#repro-body", Static).update(reproducer_text(self.reproducer))

    def checks_text(self) -> Text:
        return checks_text(self.invariants, self.violations, self.violation_target, self.app.theme_variables)

    def violation_target(self, violation: Violation):
        return violation_target(violation, self.audit.events, self.diff, set(self.span_tree.index.spans))

    def show_trace_hint(self) -> None:
        if not self.span_tree.index.spans:
            self.query_one("#span-detail", Static).update(Text(
                "No trace events yet. Agents send them with the svc tracing SDK (client.tracing) or OTLP.", style="dim"))

    @on(SpanTree.SpanSelected)
    def _span(self, event: SpanTree.SpanSelected) -> None:
        detail = span_detail(event.span, self.app.theme_variables)
        if event.span is not None:
            detail.append_text(span_scores(self.scores, event.span.span_id, self.app.theme_variables))
        self.query_one("#span-detail", Static).update(detail)

    # --- actions ------------------------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_audit_filter(self) -> None:
        self.audit.cycle_filter()
        self.render_side()

    def action_next_violation(self) -> None:
        """Jump to the event that broke the next forbidden rule: audit row, diff entry or span."""
        if not self.violations:
            self.notify("no forbidden-rule violation in this run", timeout=2)
            return
        self._violation_cursor = (self._violation_cursor + 1) % len(self.violations)
        violation = self.violations[self._violation_cursor]
        target = self.violation_target(violation)
        self.notify(f"{violation.rule}: {violation.message}", severity="error", timeout=4)
        if target is None:
            self.action_tab("checks")
        elif target[0] == "audit":
            self.action_tab("audit")
            self.audit.reveal(self.audit.events[target[1]].index)
        elif target[0] == "diff":
            self.action_tab("diff")
            table = self.query_one("#diff-table", KeyedTable)
            table.select_key(next(k for k in table.keys if k[1:] == target[1]))
            table.focus()
        else:
            self.span_tree.reveal(target[1])
            self.span_tree.focus()

    def action_copy(self) -> None:
        if not self.reproducer:
            self.notify("no reproducer yet", severity="warning")
            return
        self.app.copy_to_clipboard(self.reproducer)
        self.notify("reproducer copied to the clipboard", timeout=2)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow and not self.terminal:
            self.start_following()
        else:
            self.workers.cancel_group(self, "follow-sandbox")
            self.workers.cancel_group(self, "follow-run")
            self._sandbox_stream = self._run_stream = False
        self.render_summary()

    def action_rerun(self) -> None:
        if self.scenario is None:
            self.notify("nothing to rerun from here", severity="warning")
            return

        async def rerun() -> None:
            new_id = await self.guard(self.backend.rerun(self.scenario, self.spec_id))
            if new_id:
                self.notify(f"rerun queued: {new_id}")
                self.app.push_screen(RunScreen(run_id=new_id, spec_id=self.spec_id))  # backend.rerun answers a Run

        self.run_worker(rerun(), group="rerun", exit_on_error=False)

