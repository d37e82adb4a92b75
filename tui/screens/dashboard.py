"""The experiments dashboard (default screen): every experiment with status, progress, pass rate and
its sparkline over the spec's history, cost and p95 wall; live, filterable, sortable."""
from __future__ import annotations

import asyncio
import time

from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input, Static

from client.api import ApiError
from client.routes import R
from tui import format as f
from tui.backend import route_missing
from tui.data import ExperimentRow, HistoryPoint
from tui.screens.base import SvcScreen
from tui.widgets.keyed_table import KeyedTable

COLUMNS = [
    ("status", "Status", 9), ("name", "Name", None), ("progress", "Runs", 6), ("pass", "Pass", 4),
    ("trend", "Trend", 8), ("cost", "Cost", 7), ("p95", "p95", 6), ("age", "Age", 3),
]
SORTS = {
    "created": lambda r: r.created_at or "",
    "name": lambda r: r.name.lower(),
    "status": lambda r: r.status,
    "pass": lambda r: -1 if r.pass_rate is None else r.pass_rate,
    "cost": lambda r: -1 if r.cost_usd is None else r.cost_usd,
    "p95": lambda r: -1 if r.p95_wall_ms is None else r.p95_wall_ms,
}
FIXED_WIDTH = 9 + 6 + 4 + 8 + 7 + 6 + 3 + 2 * len(COLUMNS) + 2  # every column but Name, with cell padding
HEADER_SORT = {"status": "status", "name": "name", "pass": "pass", "cost": "cost", "p95": "p95", "age": "created"}
HISTORY_TTL_S = 10.0
MAX_LIVE_METRICS = 20


def labelled_row(row: ExperimentRow) -> str:
    return f"{row.name} ({row.id})" if row.name else row.id


class DashboardScreen(SvcScreen):
    CRUMB = "Experiments"
    HELP = ("Every experiment, live. Open one with enter; filter with /; sort with o (reverse O). To compare, mark "
            "the baseline with space, then press c on the candidate (or c alone: pick the baseline).")
    IS_HOME = True
    BINDINGS = [
        Binding("enter", "open", "Open", show=True),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("c", "compare", "Compare"),
        Binding("space", "mark", "Mark baseline"),
        Binding("o", "sort", "Sort"),
        Binding("O", "reverse", "Reverse sort", show=False),
        Binding("x", "cancel", "Cancel exp…", show=False),
        Binding("ctrl+r", "refresh", "Reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, ExperimentRow] = {}
        self.histories: dict[str, tuple[float, list[HistoryPoint]]] = {}
        self.history_supported = True
        self.filter_text = ""
        self.sort_key = "created"
        self.sort_reverse = True
        self.marked: str | None = None
        self._last_status: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Input(placeholder="filter: name, spec, status or id — enter keeps, esc clears", id="filter", classes="hidden", compact=True)
        yield Static("", id="firing", classes="detail hidden")
        yield KeyedTable(COLUMNS, id="experiments", collapse_when_empty=True)
        yield Static("", id="empty", classes="hint")
        yield Static("", id="detail", classes="detail")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(KeyedTable).focus()
        self.app.theme_changed_signal.subscribe(self, lambda _t: self.render_rows())

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#experiments", KeyedTable)

    # --- data ---------------------------------------------------------------------------------------
    async def load(self) -> None:
        rows = await self.guard(self.backend.experiments())
        if rows is None:
            return
        fresh = {r.id: r for r in rows}
        changed_specs = {r.spec_id for r in rows if self._last_status.get(r.id) != r.status}
        self._last_status = {r.id: r.status for r in rows}
        await self._load_histories(fresh, changed_specs)
        running = [row for row in fresh.values() if row.status == "running" and row.pass_rate is None]
        for row, metrics in zip(running, await asyncio.gather(
                *[self.guard(self.backend.metrics(row.id), quiet_404=True) for row in running[:MAX_LIVE_METRICS]])):
            if metrics is not None:
                row.absorb_metrics(metrics)
        self.rows = fresh
        self.render_rows()
        await self._load_firing()

    async def _load_firing(self) -> None:
        """Alert rules in state `firing`, on one line above the table (hidden when none)."""
        page = await self.guard(self.backend.call(R.LIST_ALERTS, query={"limit": 100}), quiet_404=True)
        firing = [r for r in (page or {}).get("items", []) if r.get("state") == "firing"]
        line = self.query_one("#firing", Static)
        line.update("[b red]firing:[/] " + escape(", ".join(f"{r['name']} ({r['condition']})" for r in firing)) if firing else "")
        line.display = bool(firing)

    async def _load_histories(self, rows: dict[str, ExperimentRow], changed: set[str]) -> None:
        if not self.history_supported:
            return
        now = time.monotonic()
        specs = sorted({r.spec_id for r in rows.values() if r.spec_id})
        stale = [s for s in specs if s in changed or now - self.histories.get(s, (-1e9, []))[0] >= HISTORY_TTL_S]

        gate = asyncio.Semaphore(8)  # stay well inside the daemon's per-key rate limit

        async def fetch(spec_id: str):
            async with gate:
                try:
                    return await self.backend.history(spec_id)
                except ApiError as exc:
                    return exc

        for spec_id, answer in zip(stale, await asyncio.gather(*[fetch(s) for s in stale])):
            if isinstance(answer, ApiError):
                if route_missing(answer):  # an older daemon without the history endpoint
                    self.history_supported = False
                    return
                answer = self.histories.get(spec_id, (0, []))[1]
            self.histories[spec_id] = (now, answer)
        for spec_id in specs:
            points = self.histories.get(spec_id, (0, []))[1]
            by_id = {p.experiment_id: p for p in points}
            for row in rows.values():
                point = by_id.get(row.id)
                if point is None:
                    continue
                row.pass_rate = row.pass_rate if row.pass_rate is not None else point.pass_rate
                row.cost_usd = row.cost_usd if row.cost_usd is not None else point.cost_usd
                row.p95_wall_ms = row.p95_wall_ms if row.p95_wall_ms is not None else point.p95_wall_ms

    # --- view ---------------------------------------------------------------------------------------
    def visible_rows(self) -> list[ExperimentRow]:
        rows = [r for r in self.rows.values() if r.matches(self.filter_text)]
        rows.sort(key=SORTS[self.sort_key], reverse=self.sort_reverse)
        return rows

    def cells(self, row: ExperimentRow) -> tuple:
        variables = self.app.theme_variables
        trend = self.trend(row)
        mark = "★ " if row.id == self.marked else ""
        tone = f.outcome_tone(row.status, row.pass_rate)
        return (
            Text(row.status, style=f"bold {f.colour(variables, tone)}"),
            Text(mark + f.truncate(row.name or row.id, self.name_width() - len(mark))),
            f.progress(row.done, row.total),
            Text(f.pct(row.pass_rate), style=f.colour(variables, f.rate_tone(row.pass_rate))),
            Text(f.sparkline(trend), style=f.colour(variables, "accent")),
            f.money(row.cost_usd),
            f.ms(row.p95_wall_ms),
            f.age(row.created_at),
        )

    def name_width(self) -> int:
        """Names in full when the terminal is wide enough: Name takes what the other columns leave."""
        return max(12, (self.size.width or 80) - FIXED_WIDTH)

    def on_resize(self) -> None:
        if self.rows:
            self.render_rows()

    def apply_filter(self, text: str) -> None:
        box = self.query_one("#filter", Input)
        box.value = text
        box.set_class(not text, "hidden")
        self.filter_text = text
        self.render_rows()

    def trend(self, row: ExperimentRow, width: int = 8) -> list[float | None]:
        """Pass rates of the spec's experiments up to and including this one (oldest first)."""
        points = self.histories.get(row.spec_id, (0, []))[1]
        upto = next((i for i, p in enumerate(points) if p.experiment_id == row.id), None)
        if upto is None:
            return []
        return [p.pass_rate for p in points[max(0, upto + 1 - width):upto + 1]]

    def render_rows(self) -> None:
        visible = self.visible_rows()
        self.table.sync([(r.id, self.cells(r)) for r in visible])
        empty = self.query_one("#empty", Static)
        if not self.rows:
            empty.update("No experiments yet. Press [b]l[/] to launch a spec, or run [b]svc eval run SPEC.yaml[/].")
        elif not visible:
            empty.update(f"No experiment matches “{escape(self.filter_text)}”. Press [b]esc[/] to clear the filter.")
        else:
            empty.update("")
        empty.display = not visible
        self.show_detail()

    def show_detail(self) -> None:
        key = self.table.selected_key
        row = self.rows.get(key or "")
        detail = self.query_one("#detail", Static)
        if row is None:
            detail.update("")
            return
        sort = f"sort: {self.sort_key}{' ↓' if self.sort_reverse else ' ↑'}"
        flt = f"  filter: “{self.filter_text}”" if self.filter_text else ""
        version = f" v{row.spec_version}" if row.spec_version else ""
        detail.update(Text.assemble(f"{row.id}  spec {row.spec_id}{version}  {f.clock(row.created_at)}   ", (f"{sort}{flt}", "dim")))

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self.show_detail()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_open()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        key = HEADER_SORT.get(event.column_key.value or "")
        if key:
            self.sort_reverse = not self.sort_reverse if key == self.sort_key else key in ("created", "pass", "cost", "p95")
            self.sort_key = key
            self.render_rows()

    # --- filter -------------------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("hidden")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.render_rows()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.table.focus()
        if not self.filter_text:
            self.query_one("#filter", Input).add_class("hidden")

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if self.filter_text or not box.has_class("hidden"):
            box.value = ""
            box.add_class("hidden")
            self.table.focus()

    # --- actions ------------------------------------------------------------------------------------
    def action_sort(self) -> None:
        keys = list(SORTS)
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self.render_rows()
        self.notify(f"sorted by {self.sort_key}", timeout=1.5)

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.render_rows()

    def action_refresh(self) -> None:
        self.histories.clear()
        self.poll(force=True)

    def action_open(self) -> None:
        key = self.table.selected_key
        if key:
            from tui.screens.experiment import ExperimentScreen

            self.app.push_screen(ExperimentScreen(key))

    def action_mark(self) -> None:
        key = self.table.selected_key
        self.marked = None if key == self.marked else key
        self.render_rows()
        if self.marked:
            marked = self.rows.get(self.marked)
            self.notify(f"baseline: {labelled_row(marked) if marked else self.marked}; select the candidate and press c", timeout=3)

    def action_compare(self) -> None:
        key = self.table.selected_key
        if not key:
            return
        from tui.screens.compare import CompareScreen, PickExperimentScreen

        if self.marked and self.marked != key:
            self.app.push_screen(CompareScreen(self.marked, key))
            return
        from tui.screens.compare import labelled, rank_for

        row = self.rows[key]
        others = rank_for([r for r in self.rows.values() if r.id != key], row.spec_id, row.created_at)
        self.app.push_screen(
            PickExperimentScreen(others, title=f"Candidate: {labelled(row.name, key)}\nPick its BASELINE (what it is "
                                               "compared against; same spec first):"),
            lambda picked: picked and self.app.push_screen(CompareScreen(picked, key)),
        )

    def action_cancel(self) -> None:
        key = self.table.selected_key
        row = self.rows.get(key or "")
        if row is None:
            return
        if row.terminal:
            self.notify(f"{row.id} is already {row.status}", severity="warning")
            return
        from tui.screens.confirm import ConfirmScreen

        async def cancel(yes: bool | None) -> None:
            if yes and await self.attempt(self.backend.cancel_experiment(row.id)):
                self.notify(f"cancelling {row.id}")
                self.poll(force=True)

        self.app.push_screen(ConfirmScreen(f"Cancel experiment {row.name or row.id}?"), cancel)
