"""One experiment: the metrics summary and the scenarios table (verdict, composite score, replica
and matrix entry, duration, cost), live while scenarios finish. Rerun from reproducers, compare."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input, Static

from client.api import ApiError, DaemonUnreachable
from client.routes import R
from tui import format as f
from tui.data import VERDICTS, ExperimentDetail, ScenarioRow
from tui.data.scores import ExperimentScoreView, rule_pass_rates
from tui.screens.base import SvcScreen
from tui.widgets.keyed_table import KeyedTable

COLUMNS = [
    ("verdict", "Verdict", 9), ("scenario", "Scenario", 12), ("score", "Score", 5), ("replica", "Rep", 3),
    ("matrix", "Matrix", None), ("duration", "Time", 6), ("cost", "Cost", 7),
]
FIXED_WIDTH = 9 + 12 + 5 + 3 + 6 + 7 + 2 * len(COLUMNS) + 2  # every column but Matrix, with cell padding
FILTERS = ("all", *VERDICTS, "failing")


RECORD_ROW = "record:"  # key prefix of a dataset record's group row


def record_of(s: ScenarioRow) -> str | None:
    """The dataset record a scenario ran over (its matrix entry's record_id), if any."""
    entry = s.matrix if isinstance(s.matrix, dict) else None
    record = entry.get("record_id") if entry else None
    return str(record) if record else None


def matrix_cell(s: ScenarioRow) -> str:
    """The matrix parameters; a dataset scenario's record is named by its group row above it."""
    entry = s.matrix if isinstance(s.matrix, dict) else None
    if record_of(s) is None or entry is None:
        return s.matrix_label
    return ",".join(f"{k}={v}" for k, v in entry.items() if k != "record_id")


def by_record(scenarios: list[ScenarioRow]) -> list[tuple[str | None, list[ScenarioRow]]]:
    """Scenarios grouped by dataset record, records in the order they first appear (None: no record)."""
    groups: dict[str | None, list[ScenarioRow]] = {}
    for s in scenarios:
        groups.setdefault(record_of(s), []).append(s)
    return list(groups.items())


def differing_keys(scenarios: list[ScenarioRow]) -> list[str] | None:
    """The matrix keys whose values differ between the scenarios (None: no matrix)."""
    entries = [s.matrix for s in scenarios if isinstance(s.matrix, dict) and s.matrix]
    if not entries:
        return None
    keys = list(dict.fromkeys(k for e in entries for k in e if k != "record_id"))
    return [k for k in keys if len({str(e.get(k)) for e in entries}) > 1]


def matrix_text(s: ScenarioRow, width: int, differing: list[str] | None) -> str:
    """The matrix entry in full when it fits, else only its differing part (values only when that
    is still too wide): `gpt-4o-mini` and `gpt-4o` stay apart."""
    full = matrix_cell(s)
    if len(full) <= width or not differing or not isinstance(s.matrix, dict):
        return f.truncate(full, width)
    part = ",".join(f"{k}={s.matrix.get(k)}" for k in differing)
    if len(part) > width:
        part = ",".join(str(s.matrix.get(k)) for k in differing)
    return f.truncate(part, width)


def record_verdict(rows: list[ScenarioRow]) -> str:
    """A record's verdict over its scenarios: fail or error when any did, pass when all passed."""
    statuses = {s.scenario_verdict or s.status for s in rows}
    for verdict in ("error", "fail", "flaky"):
        if verdict in statuses:
            return verdict
    return "pass" if statuses == {"pass"} else sorted(statuses - {"pass"})[0]


class ExperimentScreen(SvcScreen):
    CRUMB = "Experiment"
    HELP = ("Scenarios of one experiment, live. enter opens a run; f filters by verdict; r/R rerun from reproducers "
            "(each asks first); m shows the tool metrics.")
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("enter", "open", "Open run"),
        Binding("slash", "search", "Filter", key_display="/"),
        Binding("f", "filter", "Verdict filter"),
        Binding("y", "copy", "Copy repro"),
        Binding("c", "compare", "Compare"),
        Binding("m", "toggle_metrics", "Tool metrics"),
        Binding("r", "rerun", "Rerun…"),
        Binding("R", "rerun_failed", "Rerun failed…"),
        Binding("x", "cancel", "Cancel exp…", show=False),
    ]

    def __init__(self, experiment_id: str) -> None:
        super().__init__()
        self.experiment_id = experiment_id
        self.detail: ExperimentDetail | None = None
        self.scores: ExperimentScoreView | None = None
        self.verdict_filter = "all"
        self.search_text = ""
        self._following = False
        self._soon = None

    def crumb(self) -> str:
        return f"Experiments ▸ {self.experiment_id}"

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("loading…", id="summary", classes="summary")
        yield Static("", id="tools", classes="summary hidden")
        yield Static("", id="rule-scores")
        yield Input(placeholder="filter: scenario, matrix entry, verdict, error or id — enter keeps, esc clears",
                    id="filter", classes="hidden", compact=True)
        yield KeyedTable(COLUMNS, id="scenarios", collapse_when_empty=True)
        yield Static("", id="empty", classes="hint")
        yield Static("", id="detail", classes="detail")
        yield Static("", id="repro-line", classes="detail")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.table.focus()
        self.app.theme_changed_signal.subscribe(self, lambda _t: self.render_all())

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#scenarios", KeyedTable)

    def poll(self, force: bool = False) -> None:
        if self.detail is not None and self.detail.row.terminal and not force:
            return  # finished experiments do not change
        super().poll(force)

    def streams_live(self) -> bool:
        return self._following  # the stream reports every run, scenario and status change

    def follow(self) -> None:
        """Reload as soon as the experiment's SSE stream reports a run, scenario or status change."""
        if not self._following:
            self._following = True
            self.run_worker(self._follow(), group="follow", exclusive=True, exit_on_error=False)

    async def _follow(self) -> None:
        try:
            async for _event in self.backend.experiment_events(self.experiment_id):
                self.poll_soon()
        except DaemonUnreachable:
            self.app.lost_connection()
        except ApiError:
            pass  # the 2 s poll keeps the screen live while the stream is down
        finally:
            self._following = False

    def poll_soon(self) -> None:
        if self._soon is None:
            self._soon = self.set_timer(0.25, self._poll_now)

    def _poll_now(self) -> None:
        self._soon = None
        self.poll(force=True)

    def on_reconnected(self) -> None:
        self._following = False
        super().on_reconnected()

    async def load(self) -> None:
        detail = await self.guard(self.backend.experiment(self.experiment_id))
        if detail is None:
            return
        if not detail.metrics.total_runs and detail.row.terminal:
            metrics = await self.guard(self.backend.metrics(self.experiment_id), quiet_404=True)
            if metrics is not None:
                detail.metrics = metrics
                detail.row.absorb_metrics(metrics)
        scores = await self.guard(self.backend.call(R.EXPERIMENT_SCORES, experiment_id=self.experiment_id), quiet_404=True)
        if self.detail is not None and self.detail.metrics.tools and not detail.metrics.tools:
            detail.metrics.tools = self.detail.metrics.tools  # loaded on `m` (_load_tools): a reload keeps them
        self.detail = detail  # set with its scores and drawn at once: the screen never holds one without the other
        self.scores = ExperimentScoreView.of(scores) if scores is not None else None
        self.set_crumb(f"Experiments ▸ {detail.row.name or detail.row.id}")
        self.render_all()
        if not detail.row.terminal:
            self.follow()

    # --- view ---------------------------------------------------------------------------------------
    def visible(self) -> list[ScenarioRow]:
        scenarios = self.detail.scenarios if self.detail else []
        needle = self.search_text.lower().strip()
        return [s for s in scenarios if s.matches_verdict(self.verdict_filter)
                and (not needle or needle in " ".join((s.label, s.matrix_label, s.status, s.id, s.error)).lower())]

    def render_all(self) -> None:
        if self.detail is None:
            return
        variables = self.app.theme_variables
        self.query_one("#summary", Static).update(self.summary_text())
        self.query_one("#tools", Static).update(self.tools_table())
        rule_scores = self.query_one("#rule-scores", Static)
        rule_scores.display = bool(self.scores and self.scores.rules)
        rule_scores.update(rule_pass_rates(self.scores, variables))
        rows = []
        differing = differing_keys(self.detail.scenarios)
        width = self.matrix_width()
        for record, group in by_record(self.visible()):
            if record is not None:
                rows.append(self.record_row(record, group))
            for s in group:
                rows.append((s.id, (
                    f.styled(s.status, variables, bold=True),
                    self.scenario_cell(s),
                    f.score(s.score),
                    "" if s.replica is None else str(s.replica),
                    matrix_text(s, width, differing),
                    f.ms(s.duration_ms),
                    f.money(s.cost_usd),
                )))
        self.table.sync(rows)
        empty = self.query_one("#empty", Static)
        empty.display = not rows
        if not rows:
            empty.update("No scenarios yet." if self.verdict_filter == "all" else f"No {self.verdict_filter} scenarios (f changes the filter).")
        self.show_detail()

    def record_row(self, record: str, group: list[ScenarioRow]) -> tuple[str, tuple]:
        """The group row of one dataset record: its verdict, id and how many of its runs passed."""
        verdict = record_verdict(group)
        passed = sum(1 for s in group if s.status == "pass")
        return (RECORD_ROW + record, (
            f.styled(verdict, self.app.theme_variables, bold=True),
            Text("record", style="bold"),
            f"{passed}/{len(group)}",
            "",
            Text(f.truncate(record, self.matrix_width()), style="bold"),
            "",
            "",
        ))

    def matrix_width(self) -> int:
        return max(14, (self.size.width or 80) - FIXED_WIDTH)

    def on_resize(self) -> None:
        self.render_all()

    def scenario_cell(self, s: ScenarioRow) -> Text:
        text = Text(f.truncate(s.label, 5))
        if s.retried:  # this replica's run is a retry of infrastructure errors: ↻ and how many attempts went before
            text.append(f" ↻{s.retried}", style=f.colour(self.app.theme_variables, "warning"))
        if s.scenario_verdict and s.scenario_verdict != s.status and s.scenario_verdict in VERDICTS:
            text.append(" ")
            text.append_text(f.styled(s.scenario_verdict, self.app.theme_variables))
        return text

    def summary_text(self) -> Text:
        d = self.detail
        assert d is not None
        variables = self.app.theme_variables
        row, m = d.row, d.metrics
        counts = {v: 0 for v in VERDICTS}
        if d.verdicts:
            counts.update({k: int(v) for k, v in d.verdicts.items() if k in counts and isinstance(v, int)})
        else:
            for s in d.scenarios:
                if s.status in counts:
                    counts[s.status] += 1
        text = Text()
        rate = m.pass_rate if m.pass_rate is not None else row.pass_rate
        text.append(row.status, style=f"bold {f.colour(variables, f.outcome_tone(row.status, rate))}")
        text.append(f"  {f.progress(row.done, row.total)} runs  ")
        for verdict in VERDICTS:
            if counts[verdict]:
                text.append_text(f.styled(verdict, variables, text=f"{counts[verdict]} {verdict}  "))
        text.append("\npass ")
        text.append(f.pct(rate), style=f"bold {f.colour(variables, f.rate_tone(rate))}")
        if m.pass_rate_low is not None and m.pass_rate_high is not None:
            text.append(f" [{f.pct(m.pass_rate_low)}–{f.pct(m.pass_rate_high)}]", style="dim")
        text.append(f"  cost {f.money(m.total_cost_usd if m.total_cost_usd is not None else row.cost_usd)}")
        text.append(f"  wall {f.ms(m.mean_wall_ms)} / p95 {f.ms(m.p95_wall_ms)}")
        if m.tool_success_rate is not None:
            text.append(f"  tools {f.num(m.total_tool_calls)} ok {f.pct(m.tool_success_rate)}")
        retried = sum(s.retried for s in d.scenarios)
        if retried:
            text.append(f"  ↻ {retried} retried", style=f.colour(variables, "warning"))
        text.append(f"   filter: {self.verdict_filter}", style="dim")
        return text

    def tools_table(self) -> Table | Text:
        tools = self.detail.metrics.tools if self.detail else []
        if not tools:
            return Text("no tool calls recorded", style="dim")
        table = Table("tool", "calls", "mean", "errors", box=None, padding=(0, 1))
        for name, count, mean, errors in tools:
            table.add_row(f.plain(name), f.num(count), f.ms(mean), f.pct(errors))
        return table

    def selected(self) -> ScenarioRow | None:
        key = self.table.selected_key
        return next((s for s in self.visible() if s.id == key), None)

    def show_detail(self) -> None:
        s = self.selected()
        detail = self.query_one("#detail", Static)
        key = self.table.selected_key or ""
        if s is None and key.startswith(RECORD_ROW):
            group = [r for r in self.visible() if record_of(r) == key.removeprefix(RECORD_ROW)]
            detail.update(f"dataset record {key.removeprefix(RECORD_ROW)}: {len(group)} run(s), "
                          f"{sum(1 for r in group if r.status == 'pass')} passed")
            self.query_one("#repro-line", Static).update("")
            return
        if s is None:
            detail.update("")
            self.query_one("#repro-line", Static).update("")
            return
        text = Text()
        text.append(f"{s.id}", style="bold")
        if s.seed:
            text.append(f"  seed {s.seed}")
        if s.error:
            text.append(f"  {f.truncate(s.error, 60)}", style=f.colour(self.app.theme_variables, "error"))
        if s.violations:
            text.append(f"  ✗ {len(s.violations)} forbidden", style=f.colour(self.app.theme_variables, "error"))
        if s.retried:
            text.append(f"  ↻ retried {s.retried}× after infrastructure errors (earlier attempts {', '.join(s.previous_run_ids)})",
                        style=f.colour(self.app.theme_variables, "warning"))
        elif s.scenario_retried:
            text.append(f"  scenario: {s.scenario_retried} retried attempt(s) on other replicas", style="dim")
        detail.update(text)
        repro = self.query_one("#repro-line", Static)
        repro.update(Text(f"$ {' '.join(s.reproducer.split())}", no_wrap=True, overflow="ellipsis") if s.reproducer
                     else Text("no reproducer yet", style="dim"))

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self.show_detail()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open()

    # --- actions ------------------------------------------------------------------------------------
    def action_open(self) -> None:
        scenario = self.selected()
        if scenario is not None:
            from tui.screens.run import RunScreen

            self.app.push_screen(RunScreen(scenario, experiment_id=self.experiment_id,
                                           spec_id=self.detail.row.spec_id if self.detail else None))

    def action_search(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("hidden")
        box.focus()

    @on(Input.Changed, "#filter")
    def _search_changed(self, event: Input.Changed) -> None:
        self.search_text = event.value
        self.render_all()

    @on(Input.Submitted, "#filter")
    def _search_done(self) -> None:
        self.table.focus()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if not box.has_class("hidden"):
            box.value = ""
            box.add_class("hidden")
            self.table.focus()
            return
        super().action_back()

    def action_filter(self) -> None:
        self.verdict_filter = FILTERS[(FILTERS.index(self.verdict_filter) + 1) % len(FILTERS)]
        self.render_all()

    def action_toggle_metrics(self) -> None:
        tools = self.query_one("#tools", Static)
        tools.toggle_class("hidden")
        if not tools.has_class("hidden") and self.detail is not None and not self.detail.metrics.tools:
            self.run_worker(self._load_tools(), group="tools", exclusive=True, exit_on_error=False)

    async def _load_tools(self) -> None:
        """The per-tool breakdown lives on the metrics endpoint, not in the experiment's results."""
        metrics = await self.guard(self.backend.metrics(self.experiment_id), quiet_404=True)
        if metrics is not None and self.detail is not None:
            self.detail.metrics.tools = metrics.tools
            self.query_one("#tools", Static).update(self.tools_table())

    def action_copy(self) -> None:
        scenario = self.selected()
        if scenario is None or not scenario.reproducer:
            self.notify("no reproducer for this scenario", severity="warning")
            return
        self.app.copy_to_clipboard(scenario.reproducer)
        self.notify("reproducer copied to the clipboard", timeout=2)

    def action_rerun(self) -> None:
        scenario = self.selected()
        if scenario is None or not self.online("rerun"):
            return
        self.confirm(f"Start a new run replaying {scenario.run_id or scenario.id} "
                     f"({scenario.label}{', ' + matrix_cell(scenario) if matrix_cell(scenario) else ''}, seed {scenario.seed or '?'})?",
                     lambda: self.run_worker(self._rerun([scenario]), group="rerun", exit_on_error=False))

    def action_rerun_failed(self) -> None:
        """A new experiment with exactly the scenarios that failed, were flaky or errored here."""
        detail = self.detail
        if detail is None:
            return
        if not any(s.failed for s in detail.scenarios):
            self.notify("nothing failed here", timeout=2)
            return
        if not detail.row.terminal:
            self.notify("wait until the experiment finishes to rerun its failures", severity="warning")
            return
        if not self.online("rerun failed"):
            return
        failed = sum(1 for s in detail.scenarios if s.failed)

        async def rerun() -> None:
            new_id = await self.guard(self.backend.rerun_failed(detail.row))
            if new_id:
                self.notify(f"rerunning the failures of {detail.row.id} as {new_id}", timeout=3)
                self.app.push_screen(ExperimentScreen(new_id))

        self.confirm(f"Start a new experiment “{detail.row.name or detail.row.id} (failed rerun)” with the "
                     f"{failed} failed, flaky or errored run(s)?",
                     lambda: self.run_worker(rerun(), group="rerun", exit_on_error=False))

    async def _rerun(self, scenarios: list[ScenarioRow]) -> None:
        started = []
        for scenario in scenarios:
            new_id = await self.guard(self.backend.rerun(scenario, self.detail.row.spec_id if self.detail else None))
            if new_id:
                started.append(new_id)
        if started:
            self.notify(f"rerun queued: {', '.join(started[:3])}{' …' if len(started) > 3 else ''}", title=f"{len(started)} rerun(s)")
            if len(started) == 1:
                from tui.screens.run import RunScreen

                self.app.push_screen(RunScreen(run_id=started[0], spec_id=self.detail.row.spec_id if self.detail else None))

    def action_compare(self) -> None:
        from tui.screens.compare import CompareScreen, PickExperimentScreen, labelled, rank_for

        async def pick() -> None:
            rows = await self.guard(self.backend.experiments())
            if rows is None:
                return
            me = self.detail.row if self.detail else None
            choices = rank_for([r for r in rows if r.id != self.experiment_id], me.spec_id if me else None,
                               me.created_at if me else None)
            self.app.push_screen(
                PickExperimentScreen(choices, title=f"Candidate: {labelled(me.name if me else '', self.experiment_id)}\n"
                                                    "Pick its BASELINE (what it is compared against; same spec first):"),
                lambda picked: picked and self.app.push_screen(CompareScreen(picked, self.experiment_id)),
            )

        self.run_worker(pick(), group="pick", exit_on_error=False)

    def action_cancel(self) -> None:
        from tui.screens.confirm import ConfirmScreen

        async def cancel(yes: bool | None) -> None:
            if yes and await self.attempt(self.backend.cancel_experiment(self.experiment_id)):
                self.notify(f"cancelling {self.experiment_id}")
                self.poll(force=True)

        self.app.push_screen(ConfirmScreen(f"Cancel experiment {self.experiment_id}?"), cancel)

