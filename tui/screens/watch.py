"""Watch mode: the spec being watched, the paths that trigger a re-run, and a log of changes,
runs started, stale runs cancelled and results. The engine lives on the app (tui.watch)."""
from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import RichLog, Static

from tui import format as f
from tui.screens.base import SvcScreen
from tui.watch import WatchEvent

TONE = {"finished": "success", "started": "accent", "change": "warning", "cancelled": "warning",
        "invalid": "error", "error": "error", "watching": "secondary", "progress": "foreground"}


class WatchScreen(SvcScreen):
    CRUMB = "Watch"
    HELP = "Re-runs the spec when it or a file it references changes; a stale run is cancelled. o opens the latest run."
    POLL_S = None
    BINDINGS = [
        Binding("o", "open_latest", "Open latest"),
        Binding("x", "stop", "Stop watching…"),
        Binding("R", "rerun_now", "Run now…"),
    ]

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Static("", id="watch-head", classes="summary")
        yield RichLog(id="watch-log", max_lines=5000, wrap=True, markup=False)
        yield from self.compose_bottom()

    def __init__(self) -> None:
        super().__init__()
        self._engine = None
        self._shown = 0

    def on_mount(self) -> None:
        super().on_mount()
        self.sync_events()

    def on_screen_resume(self) -> None:
        self.sync_events()

    def render_head(self) -> None:
        engine = self.app.watcher
        head = self.query_one("#watch-head", Static)
        if engine is None:
            head.update("Not watching anything. Press l, pick a spec, then ctrl+w.")
            return
        text = Text()
        text.append(f"watching {engine.spec.name}", style="bold")
        text.append(f"   runs {len(engine.runs)}  cancelled {len(engine.cancelled)}")
        text.append(f"   current {engine.current or '—'}", style="dim")
        head.update(text)

    def add_event(self, event: WatchEvent) -> None:
        self.sync_events()

    def sync_events(self) -> None:
        """Write the engine's events not shown yet (a new engine starts a fresh log)."""
        engine = self.app.watcher
        if not self.is_mounted:
            return  # on_mount catches up
        log = self.query_one("#watch-log", RichLog)
        if engine is not self._engine:
            self._engine, self._shown = engine, 0
            log.clear()
        if engine is not None:
            for event in engine.events[self._shown:]:
                self._write(log, event)
            self._shown = len(engine.events)
        self.render_head()

    def _write(self, log: RichLog, event: WatchEvent) -> None:
        variables = self.app.theme_variables
        line = Text(datetime.fromtimestamp(event.ts).strftime("%H:%M:%S "), style="dim")
        line.append(f"{event.kind:<9} ", style=f"bold {f.colour(variables, TONE.get(event.kind, 'foreground'))}")
        line.append(event.message)
        log.write(line)
        if event.kind == "invalid" and event.detail:
            for issue in event.detail:
                log.write(Text(f"          line {issue.line or '?'} {issue.loc}: {issue.msg}", style=f.colour(variables, "error")))

    def action_open_latest(self) -> None:
        engine = self.app.watcher
        if engine is None or not engine.runs:
            self.notify("no run yet", severity="warning")
            return
        from tui.screens.experiment import ExperimentScreen

        self.app.push_screen(ExperimentScreen(engine.runs[-1]))

    def action_stop(self) -> None:
        engine = self.app.watcher
        if engine is None:
            return

        def stop() -> None:
            self.app.stop_watch()
            self.render_head()

        self.confirm(f"Stop watching {engine.spec.name}? An experiment still running is cancelled.", stop)

    def action_rerun_now(self) -> None:
        engine = self.app.watcher
        if engine is None or not self.online("run now"):
            return
        self.confirm(f"Start an experiment of {engine.spec.name} now (cancelling one still running)?",
                     lambda: self.run_worker(engine.trigger("manual"), group="manual", exit_on_error=False))

    def action_back(self) -> None:
        self.app.action_goto("experiments")
