"""Two experiments side by side: the metric table with deltas and worse/same/better coloured, the
regressions list, the scenarios whose verdict changed and the effects section (per scenario, what the
runs changed differently: between the experiments, or between one side's replicas)."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual import on
from textual.widgets import DataTable, Input, OptionList, Static
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


def rank_for(rows: list[ExperimentRow], spec_id: str | None, before: str | None) -> list[ExperimentRow]:
    """Candidates for a baseline: the same spec's experiments first, then those older than the
    candidate (a baseline usually came first), newest first within each group."""
    newest_first = sorted(rows, key=lambda r: r.created_at or "", reverse=True)
    return sorted(newest_first, key=lambda r: (r.spec_id != spec_id, bool(before) and (r.created_at or "") > (before or "")))


def labelled(name: str, experiment_id: str) -> str:
    return f"{name} ({experiment_id})" if name and name != experiment_id else experiment_id



# The gate's word (as `svc eval compare --gate` decides it), its colour and what it means.
GATE_WORDS = {"regressed": ("worse", "the candidate is worse"), "inconclusive": ("flaky", "no regression shown, but the test cannot tell yet"),
              "improved": ("better", "no regression: the candidate is better"), "no_change": ("better", "no regression in the candidate")}

class PickExperimentScreen(ModalScreen[str | None]):
    """Pick the baseline for a candidate: type to filter (name, spec, status, id), enter picks the
    highlighted one, down/up move in the list."""
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("down", "move(1)", show=False), Binding("up", "move(-1)", show=False)]

    def __init__(self, rows: list[ExperimentRow], title: str) -> None:
        super().__init__()
        self.rows = rows
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="pick-box"):
            yield Static(f.plain(self.title_text), classes="dialog-title")
            yield Input(placeholder="type to filter: name, spec, status or id", id="pick-filter", compact=True)
            yield OptionList(id="pick-list")

    def on_mount(self) -> None:
        self.show("")
        self.query_one(Input).focus()

    def visible(self, needle: str) -> list[ExperimentRow]:
        return [r for r in self.rows if r.matches(needle)]

    def show(self, needle: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        rows = self.visible(needle)
        for r in rows:
            options.add_option(Option(f.plain(f"{r.name or r.id}  {r.id}  spec {r.spec_id}{f' v{r.spec_version}' if r.spec_version else ''}  "
                                             f"{r.status}  {f.pct(r.pass_rate)}"), id=r.id))
        if not rows:
            options.add_option(Option("no experiment matches" if needle else "no other experiment to compare with", disabled=True))
        else:
            options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show(event.value)

    def on_input_submitted(self) -> None:
        options = self.query_one(OptionList)
        option = options.get_option_at_index(options.highlighted) if options.highlighted is not None else None
        if option is not None and option.id:
            self.dismiss(option.id)

    def action_move(self, delta: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            options.highlighted = max(0, min(options.option_count - 1, (options.highlighted or 0) + delta))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class CompareScreen(SvcScreen):
    CRUMB = "Compare"
    HELP = ("The candidate read against its baseline (baseline ← candidate): metric deltas, regressions and the scenarios "
            "whose verdict changed (enter opens both runs side by side), then the effects that differ per scenario: db "
            "writes, HTTP and model calls, files and processes, between the experiments or between one side's replicas "
            "(enter opens a run of each side). s swaps the sides.")
    POLL_S = None
    BINDINGS = [Binding("escape", "back", "Back"), Binding("enter", "open_change", "Open both runs"),
                Binding("s", "swap", "Swap sides")]

    def __init__(self, baseline_id: str, candidate_id: str) -> None:
        super().__init__()
        self.baseline_id = baseline_id
        self.candidate_id = candidate_id
        self.result: Comparison | None = None

    def crumb(self) -> str:
        r = self.result
        if r is None or r.baseline_id != self.baseline_id:
            return f"Compare ▸ baseline {self.baseline_id} ← candidate {self.candidate_id}"
        return f"Compare ▸ baseline {r.baseline_name or r.baseline_id} ← candidate {r.candidate_name or r.candidate_id}"

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("comparing…", id="verdict", classes="summary")
        yield KeyedTable([("metric", "Metric", 22), ("baseline", "Baseline", 9), ("candidate", "Candidate", 9),
                          ("delta", "Delta", 9), ("direction", "", 7)], id="metrics")
        yield Static("", id="regressions", classes="detail")
        yield KeyedTable([("scenario", "Verdict changed (enter opens both runs)", 40), ("before", "Baseline", 8),
                          ("after", "Candidate", 9)], id="changes")
        yield Static("", id="effects-head")
        yield KeyedTable([("scenario", "Scenario", 16), ("where", "Where", 18), ("difference", "Difference", None)],
                         id="effects", classes="hidden")
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
        self.set_crumb(self.crumb())
        self.render_all()

    def render_all(self) -> None:
        r = self.result
        if r is None:
            return
        variables = self.app.theme_variables
        head = Text()
        head.append("baseline ", style="dim")
        head.append(labelled(r.baseline_name, r.baseline_id), style="bold")
        head.append("  ←  candidate ", style="dim")
        head.append(labelled(r.candidate_name, r.candidate_id), style="bold")
        head.append("\n")
        word = r.decision or ("regressed" if r.regressed else "no_change")
        tone, text = GATE_WORDS.get(word, ("better", word))
        head.append_text(f.styled(tone, variables, bold=True, text=f"gate: {word.upper()}: {text}"))
        if r.reason:
            head.append(f"\n{r.reason}", style="dim")
        if r.quarantined:
            head.append("\nquarantined (run and reported, not gated): " + ", ".join(r.quarantined), style="dim")
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
            (f"{c.label}|{i}", (c.label, f.styled(c.before, variables), f.styled(c.after, variables, bold=True)))
            for i, c in enumerate(r.verdict_changes)
        ])
        self.render_effects()

    def render_effects(self) -> None:
        """The comparison's effects section: one row per difference (agent-made names as plain Text)."""
        r = self.result
        rows = r.effects if r is not None else []
        head = Text("Effects", style="bold")
        if rows:
            scenarios = len({e.scenario for e in rows})
            between = sum(1 for e in rows if e.side == "between")
            head.append(f" that differ: {between} between the experiments, {len(rows) - between} between replicas, "
                        f"in {scenarios} scenario(s)")
            head.append(" (enter opens a run of each side)", style="dim")
        elif r is not None and r.baseline_source == "bundle":
            head.append(": not compared (the baseline is a bundle: its runs are not in this daemon)", style="dim")
        else:
            head.append(": none differ between the experiments' runs or between replicas", style="dim")
        self.query_one("#effects-head", Static).update(head)
        variables = self.app.theme_variables
        table = self.query_one("#effects", KeyedTable)
        table.set_class(not rows, "hidden")
        table.sync([(f"{i}", (f.plain(e.scenario), f.styled("worse" if e.side == "between" else "flaky", variables, text=e.where),
                              f.plain(e.message)))
                    for i, e in enumerate(rows)])

    def action_open_change(self) -> None:
        table = self.query_one("#changes", KeyedTable)
        key = table.selected_key
        if self.result is None or key is None:
            return
        change = self.result.verdict_changes[int(key.rsplit("|", 1)[1])]
        if not (change.baseline_run_id or change.candidate_run_id):
            self.notify("no run recorded for this scenario", severity="warning")
            return
        from tui.screens.run_pair import RunPairScreen

        self.app.push_screen(RunPairScreen(change.baseline_run_id, change.candidate_run_id, change.label))

    @on(DataTable.RowSelected, "#changes")
    def _change_selected(self) -> None:
        self.action_open_change()

    @on(DataTable.RowSelected, "#effects")
    def _effect_selected(self) -> None:
        key = self.query_one("#effects", KeyedTable).selected_key
        if self.result is None or key is None:
            return
        row = self.result.effects[int(key)]
        if not (row.baseline_run_id or row.candidate_run_id):
            self.notify("no run recorded for this scenario", severity="warning")
            return
        from tui.screens.run_pair import RunPairScreen

        self.app.push_screen(RunPairScreen(row.baseline_run_id, row.candidate_run_id, row.scenario))

    def action_swap(self) -> None:
        self.baseline_id, self.candidate_id = self.candidate_id, self.baseline_id
        self.result = None
        self.set_crumb(self.crumb())
        self.poll(force=True)
