"""One run (scenario): the live trace tree beside the audit stream, invariant results with evidence,
forbidden-rule violations pointing at the event that broke them, the workspace diff and the
reproducer, and the run's effect ledger (what it changed: db writes, HTTP and model calls, files,
processes). The loading and the live feed are in run_feed.py."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Static, TabbedContent, TabPane

from client.routes import R
from client.time_budget import budget_line
from tui import format as f
from tui.data import InvariantRow, RunInfo, RunLedger, ScenarioRow, TraceItem, Violation, verdict, violation_target
from tui.data.scores import ExperimentScoreView, span_scores
from tui.screens.base import SvcScreen
from tui.screens.run_feed import FLUSH_S, RunFeed
from tui.widgets.audit_log import AuditLog
from tui.widgets.effects_text import ledger_text
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.run_text import checks_text, explaining_tab, reproducer_text, span_detail, why_text
from tui.widgets.span_tree import SpanTree


class DetailPane(VerticalScroll, can_focus=True):
    """The selected span's detail: focusable and scrollable (tab, arrows), z fills the screen with it."""
    ALLOW_MAXIMIZE = True


class RunScreen(RunFeed, SvcScreen):
    CRUMB = "Run"
    HELP = ("The first lines say why the run ended as it did; it opens on the tab that explains it. Trace tree "
            "(enter expands, n next error, z enlarges the span detail) beside the audit stream (/ searches, a filters "
            "by type). y copies the reproducer. 5 shows the effects: what the run changed (db writes, HTTP and model calls, files, "
            "processes; a kind whose audit was off says 'not recorded').")
    POLL_S = 2.0
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("1", "tab('audit')", "Audit", show=False),
        Binding("2", "tab('checks')", "Checks", show=False),
        Binding("3", "tab('diff')", "Diff", show=False),
        Binding("4", "tab('repro')", "Repro", show=False),
        Binding("5", "tab('effects')", "Effects", show=False),
        Binding("slash", "search", "Search audit", key_display="/"),
        Binding("v", "next_violation", "Violation"),
        Binding("y", "copy", "Copy repro"),
        Binding("z", "zoom_detail", "Span detail"),
        Binding("a", "audit_filter", "Audit type"),
        Binding("r", "rerun", "Rerun…"),
        Binding("F", "toggle_follow", "Follow", show=False),
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
        self._tab_explained = False  # moved once to the tab that explains the verdict; then the user's
        self._trace_failed = False  # the trace could not be read: "not loaded", never "0 spans"
        self.effects: RunLedger | None = None  # the run's effect ledger, once it has finished
        self.effects_unreached = False  # svcd did not answer for it: read again when it is back
        self.effects_state = ("The effect ledger is read once the run has finished." if self.run_id
                              else "Only a run has an effect ledger (this view shows a trace or a sandbox).")

    def crumb(self) -> str:
        return f"Run ▸ {self.run_id or self.sandbox_id or (self.trace_ids[0] if self.trace_ids else '?')}"

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="run-summary", classes="summary")
        with Horizontal(id="run-main"):
            with Vertical(id="run-left"):
                yield SpanTree(id="trace")
                with DetailPane(id="span-detail-box", classes="detail"):
                    yield Static("", id="span-detail")
            with TabbedContent(id="run-tabs", initial="audit"):
                with TabPane("1 Audit", id="audit"):
                    yield Input(placeholder="search the audit log (esc clears)", id="audit-search", classes="hidden", compact=True)
                    yield AuditLog(id="audit-log")
                with TabPane("2 Checks", id="checks"):
                    with VerticalScroll():
                        yield Static("", id="checks-body")
                with TabPane("3 Diff", id="diff"):
                    yield KeyedTable([("change", "", 1), ("path", "Path", 28), ("size", "Size", 6)], id="diff-table")
                with TabPane("4 Repro", id="repro"):
                    with VerticalScroll(id="repro-scroll"):
                        yield Static("", id="repro-body")
                with TabPane("5 Effects", id="effects"):
                    with VerticalScroll(id="effects-scroll"):
                        yield Static("", id="effects-body")
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
        """Three lines: why the run ended as it did, the check or rule that decided it, then the numbers."""
        variables = self.app.theme_variables
        totals = self.span_tree.index.totals
        text = Text()
        shown = verdict(self.status) if self.status not in ("?", "") else ("trace" if self.trace_ids else "…")
        text.append_text(f.styled(shown, variables, bold=True))
        headline, decisive = why_text(shown, self.info, self.invariants, self.violations, variables)
        if headline:
            text.append("  ")
            text.append_text(headline)
        text.append("\n")
        text.append_text(decisive)
        info = self.info
        numbers = []
        score = info.score if info else (self.scenario.score if self.scenario else None)
        numbers.append(f"score {f.score(score)}")
        seed = (info.seed if info else None) or (self.scenario.seed if self.scenario else None)
        if seed:
            numbers.append(f"seed {seed}")
        duration = (info.duration_ms if info else None) or (self.scenario.duration_ms if self.scenario else None)
        if duration:
            budget = budget_line(info.timings) if info else ""
            numbers.append(f.ms(duration) + (f" ({budget})" if budget else ""))
        text.append("\n" + "  ".join(numbers) + "  ")
        if self.scenario is not None and self.scenario.retried:  # this run is a retry: the attempts infrastructure errors ended
            earlier = self.scenario.previous_run_ids
            text.append(f"↻ retried {len(earlier)}× after infrastructure errors ({', '.join(earlier)})  ",
                        style=f.colour(variables, "warning"))
        if self._trace_loaded or self.span_tree.index.spans:
            text.append(f"{len(self.span_tree.index):,} spans  {totals['llm_calls']} llm  {totals['tool_calls']} tools  "
                        f"{totals['input_tokens']:,}→{totals['output_tokens']:,} tok  {f.money(totals['cost_usd'])}")
        else:
            text.append("trace not loaded" if self._trace_failed or self.app.connection != "connected" else "trace loading…",
                        style=f"bold {f.colour(variables, 'warning')}")
        if info is not None and info.models_mode:  # the model gateway's view: who answered, what it cost
            budget = f" of {f.money(info.model_budget_usd)}" if info.model_budget_usd else ""
            text.append(f"  models: {info.models_mode} · {info.model_calls or 0} calls · {f.money(info.model_cost_usd)}{budget}",
                        style=f.colour(variables, "accent"))
        if totals["errors"]:
            text.append(f"  {totals['errors']} error(s) in the trace", style=f.colour(variables, "warning"))
            text.append(" (did not decide the verdict)" if self.terminal else "", style="dim")
        if self.run_id or self.sandbox_id:
            loaded = self._final or self.audit.events or (not self.terminal and self.app.connection == "connected")
            text.append(f"  {len(self.audit.events):,} audit" if loaded else "  audit not loaded", style="dim")
            if not self.terminal:
                text.append("  ● live" if self._following else "  ○ not following (F)", style=f.colour(variables, "accent"))
        summary = self.query_one("#run-summary", Static)
        if text != self._last_summary:  # fixed height (CSS): no layout pass for a new line of numbers
            self._last_summary = text
            summary.update(text, layout=False)
        self.explain_once()

    def explain_once(self) -> None:
        """Open the tab that explains a finished run's verdict, once (then the tabs are the user's)."""
        if self._tab_explained or not self.terminal or self.info is None:
            return
        self._tab_explained = True
        tab = explaining_tab(self.info, self.invariants, self.violations)
        if tab:
            self.action_tab(tab)

    def render_side(self) -> None:
        self.render_summary()
        self.show_trace_hint()
        self.query_one("#checks-body", Static).update(self.checks_text())
        self.query_one("#repro-body", Static).update(reproducer_text(self.reproducer))
        self.query_one("#effects-body", Static).update(ledger_text(self.effects, self.effects_state, self.app.theme_variables))

    def checks_text(self) -> Text:
        return checks_text(self.invariants, self.violations, self.violation_target, self.app.theme_variables)

    def violation_target(self, violation: Violation):
        return violation_target(violation, self.audit.events, self.diff, set(self.span_tree.index.spans))

    def show_trace_hint(self) -> None:
        if not self.span_tree.index.spans and self._trace_failed:
            self.query_one("#span-detail", Static).update(Text("The trace was not loaded (svcd did not answer); it loads when svcd is back.", style="dim"))
        elif not self.span_tree.index.spans:
            self.query_one("#span-detail", Static).update(Text(
                "No trace events yet. Agents send them with the svc tracing SDK (client.tracing) or OTLP.", style="dim"))

    @on(SpanTree.SpanSelected)
    def _span(self, event: SpanTree.SpanSelected) -> None:
        scores = span_scores(self.scores, event.span.span_id, self.app.theme_variables) if event.span is not None else None
        detail = span_detail(event.span, self.app.theme_variables, scores)
        self.query_one("#span-detail", Static).update(detail)

    # --- actions ------------------------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_search(self) -> None:
        self.action_tab("audit")
        box = self.query_one("#audit-search", Input)
        box.remove_class("hidden")
        box.focus()

    @on(Input.Changed, "#audit-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.audit.filter_text(event.value)

    @on(Input.Submitted, "#audit-search")
    def _search_done(self) -> None:
        self.audit.focus()

    def action_back(self) -> None:
        box = self.query_one("#audit-search", Input)
        if box.has_focus or box.value:
            box.value = ""
            box.add_class("hidden")
            self.audit.filter_text("")
            self.audit.focus()
            return
        if self.maximized is not None:
            self.minimize()
            return
        super().action_back()

    def action_zoom_detail(self) -> None:
        """The span detail pane over the whole screen (scrollable), or back."""
        box = self.query_one("#span-detail-box")
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(box, container=False)
            box.focus()

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
        if not self.online("rerun"):
            return
        seed = self.scenario.seed or (self.info.seed if self.info else None)
        self.confirm(f"Start a new run of spec {self.spec_id or '?'} from seed {seed or '?'} "
                     f"(replaying {self.run_id or self.scenario.id})?", self._rerun)

    def _rerun(self) -> None:
        async def rerun() -> None:
            new_id = await self.guard(self.backend.rerun(self.scenario, self.spec_id))
            if new_id:
                self.notify(f"rerun queued: {new_id}")
                self.app.push_screen(RunScreen(run_id=new_id, spec_id=self.spec_id))  # backend.rerun answers a Run

        self.run_worker(rerun(), group="rerun", exit_on_error=False)

