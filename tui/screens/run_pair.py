"""Two runs of one scenario side by side (a verdict that changed between two experiments): each
side says why its run ended as it did, then its checks and forbidden rules; below, what differs
between the two runs' effects (`svc runs diff A B`). 1/2 opens one side in the full run view."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from client.api import ApiError, DaemonUnreachable
from tui import format as f
from tui.backend import route_missing
from tui.data import RunEffectsDiff, RunInfo
from tui.screens.base import SvcScreen
from tui.widgets.effects_text import diff_text
from tui.widgets.run_text import checks_text, why_text

SIDES = ("baseline", "candidate")


class RunPairScreen(SvcScreen):
    CRUMB = "Runs side by side"
    HELP = ("The baseline's run beside the candidate's, each with why it ended as it did, and below what differs between "
            "their effects (db writes, HTTP and model calls, files, processes). 1 / 2 open one in the run view.")
    POLL_S = None
    BINDINGS = [Binding("escape", "back", "Back"), Binding("1", "open('baseline')", "Open baseline run"),
                Binding("2", "open('candidate')", "Open candidate run")]

    def __init__(self, baseline_run_id: str | None, candidate_run_id: str | None, label: str) -> None:
        super().__init__()
        self.run_ids = {"baseline": baseline_run_id, "candidate": candidate_run_id}
        self.label = label
        self.infos: dict[str, RunInfo | None] = {}
        self.effects: RunEffectsDiff | None = None
        self.effects_state = "loading the effects…" if baseline_run_id and candidate_run_id else "one side has no run: nothing to compare"

    def crumb(self) -> str:
        return f"Compare ▸ {self.label} ▸ baseline run ← candidate run"

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        with Horizontal(id="pair"):
            for side in SIDES:
                with VerticalScroll(id=f"pair-{side}", classes="pair-side"):
                    yield Static(f"{side}: loading…", id=f"pair-{side}-body")
        with VerticalScroll(id="pair-effects"):
            yield Static("", id="pair-effects-body")
        yield from self.compose_bottom()

    async def load(self) -> None:
        for side in SIDES:
            run_id = self.run_ids[side]
            self.infos[side] = await self.guard(self.backend.run(run_id), quiet_404=True) if run_id else None
        base, cand = self.run_ids["baseline"], self.run_ids["candidate"]
        if base and cand and self.effects is None:
            try:
                self.effects = await self.backend.effects_diff(base, cand)
            except DaemonUnreachable:
                self.effects_state = "not loaded (svcd did not answer)"
                self.app.lost_connection()
            except ApiError as exc:
                self.effects_state = ("this svcd has no effect ledger (an older version)" if route_missing(exc)
                                      else f"not compared: {exc.body.get('message') or exc}")
        self.render_all()

    def render_all(self) -> None:
        variables = self.app.theme_variables
        for side in SIDES:
            info = self.infos.get(side)
            text = Text()
            text.append(f"{side} ", style="bold underline")
            text.append(self.run_ids[side] or "no run", style="dim")
            text.append("\n")
            if info is None:
                text.append("not loaded" if self.run_ids[side] else "this side has no run of the scenario", style="dim")
            else:
                text.append_text(f.styled(info.status, variables, bold=True))
                headline, decisive = why_text(info.status, info, info.invariants, info.violations, variables)
                text.append("  ")
                text.append_text(headline)
                if decisive:
                    text.append("\n")
                    text.append_text(decisive)
                text.append(f"\nscore {f.score(info.score)}  seed {info.seed or f.DASH}  {f.ms(info.duration_ms)}\n\n")
                text.append_text(checks_text(info.invariants, info.violations, lambda _v: None, variables))
            self.query_one(f"#pair-{side}-body", Static).update(text)
        self.query_one("#pair-effects-body", Static).update(
            diff_text(self.effects, self.effects_state, (f"baseline {self.run_ids['baseline']}", f"candidate {self.run_ids['candidate']}"),
                      variables))

    def action_open(self, side: str) -> None:
        run_id = self.run_ids.get(side)
        if run_id:
            from tui.screens.run import RunScreen

            self.app.push_screen(RunScreen(run_id=run_id))
