"""Two experiments side by side: the metric table with deltas and worse/same/better coloured, the
regressions list and the scenarios whose verdict changed."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui import format as f
from tui.data import Comparison, ExperimentRow, verdict_changes
from tui.screens.base import SvcScreen
from tui.widgets.keyed_table import KeyedTable

RATES = {"pass_rate", "tool_success_rate"}
MONEY = {"total_cost_usd", "mean_cost_per_run_usd"}


def fmt_metric(name: str, value: float | None) -> str:
    if value is None:
        return f.DASH
    if name in RATES:
        return f.pct(value, 1)
    if name in MONEY:
        return f.money(value)
    if name.endswith("_ms"):
        return f.ms(value)
    return f.num(value)


def fmt_delta(name: str, delta: float | None) -> str:
    if delta is None:
        return f.DASH
    sign = "+" if delta > 0 else ""
    if name in RATES:
        return f"{sign}{delta * 100:.1f}pp"
    if name in MONEY:
        return f"{sign}{f.money(abs(delta)) if delta >= 0 else '-' + f.money(abs(delta))}"
    if name.endswith("_ms"):
        return f"{sign}{delta:.0f}ms"
    return f"{sign}{f.num(delta)}"


class PickExperimentScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, rows: list[ExperimentRow], title: str) -> None:
        super().__init__()
        self.rows = rows
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="pick-box"):
            yield Static(self.title_text, classes="dialog-title")
            options = [Option(f"{r.name or r.id}  {r.id}  {r.status}  {f.pct(r.pass_rate)}", id=r.id) for r in self.rows]
            yield OptionList(*options) if options else Static("no other experiment to compare with")

    def on_mount(self) -> None:
        for options in self.query(OptionList):
            options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class CompareScreen(SvcScreen):
    CRUMB = "Compare"
    HELP = "Baseline against candidate: metric deltas, regressions, verdict changes. s swaps them."
    POLL_S = None
    BINDINGS = [Binding("s", "swap", "Swap sides"), Binding("escape", "back", "Back")]

    def __init__(self, baseline_id: str, candidate_id: str) -> None:
        super().__init__()
        self.baseline_id = baseline_id
        self.candidate_id = candidate_id
        self.result: Comparison | None = None

    def crumb(self) -> str:
        return f"Compare ▸ {self.baseline_id} → {self.candidate_id}"

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("comparing…", id="verdict", classes="summary")
        yield KeyedTable([("metric", "Metric", 22), ("baseline", "Baseline", 9), ("candidate", "Candidate", 9),
                          ("delta", "Delta", 9), ("direction", "", 7)], id="metrics")
        yield Static("", id="regressions", classes="detail")
        yield KeyedTable([("scenario", "Verdict changed", 30), ("before", "Baseline", 8), ("after", "Candidate", 9)], id="changes")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _t: self.render_all())

    async def load(self) -> None:
        result = await self.guard(self.backend.compare(self.baseline_id, self.candidate_id))
        if result is None:
            return
        if not result.verdict_changes:
            base = await self.guard(self.backend.experiment(self.baseline_id), quiet_404=True)
            cand = await self.guard(self.backend.experiment(self.candidate_id), quiet_404=True)
            if base is not None and cand is not None:
                result.verdict_changes = verdict_changes(base.scenarios, cand.scenarios)
        self.result = result
        self.render_all()

    def render_all(self) -> None:
        r = self.result
        if r is None:
            return
        variables = self.app.theme_variables
        head = Text()
        head.append(f"{r.baseline_id} → {r.candidate_id}   ")
        head.append_text(f.styled("worse" if r.regressed else "better", variables, bold=True,
                                  text="REGRESSED" if r.regressed else "no regression"))
        self.query_one("#verdict", Static).update(head)
        self.query_one("#metrics", KeyedTable).sync([
            (m.name, (m.name, fmt_metric(m.name, m.baseline), fmt_metric(m.name, m.candidate),
                      fmt_delta(m.name, m.delta), f.styled(m.direction, variables, bold=m.direction == "worse")))
            for m in r.metrics
        ])
        regressions = Text("Regressions\n", style="bold")
        for line in r.regressions or ["none"]:
            regressions.append(f"  • {line}\n", style=f.colour(variables, "error") if r.regressions else "dim")
        self.query_one("#regressions", Static).update(regressions)
        self.query_one("#changes", KeyedTable).sync([
            (f"{key}|{i}", (key, f.styled(before, variables), f.styled(after, variables, bold=True)))
            for i, (key, before, after) in enumerate(r.verdict_changes)
        ])

    def action_swap(self) -> None:
        self.baseline_id, self.candidate_id = self.candidate_id, self.baseline_id
        self.set_crumb(self.crumb())
        self.poll(force=True)
