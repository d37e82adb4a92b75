"""Live sandboxes: state, age, CPU and memory (when the daemon reports them); open a sandbox's
lifecycle stream; delete one."""
from __future__ import annotations

import json

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, RichLog, Static

from client.api import ApiError, DaemonUnreachable
from tui import format as f
from tui.data import SandboxRow
from tui.screens.base import SvcScreen
from tui.widgets.keyed_table import KeyedTable

COLUMNS = [("id", "Sandbox", 21), ("state", "State", 9), ("spec", "Spec", 12), ("age", "Age", 4),
           ("cpu", "CPU", 5), ("mem", "Mem", 7), ("image", "Image", None)]


def cpu_cell(r: SandboxRow) -> str:
    """Usage when the daemon reports it, else the limit (`≤1`)."""
    if r.cpu_percent is not None:
        return f"{r.cpu_percent:.0f}%"
    return f.DASH if r.cpu_limit is None else f"≤{r.cpu_limit:g}"


def mem_cell(r: SandboxRow) -> str:
    if r.memory_bytes is not None:
        return f.bytes_(r.memory_bytes)
    return f.DASH if r.memory_limit is None else "≤" + f.bytes_(r.memory_limit)


class SandboxesScreen(SvcScreen):
    CRUMB = "Sandboxes"
    HELP = "Live sandboxes. enter follows the lifecycle stream; d deletes; o opens its trace and audit log."
    BINDINGS = [
        Binding("enter", "stream", "Lifecycle"),
        Binding("d", "delete", "Delete"),
        Binding("o", "open_run", "Trace"),
        Binding("A", "toggle_all", "Show stopped", show=False),
        Binding("r", "refresh", "Refresh", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, SandboxRow] = {}
        self.streaming: str | None = None
        self.show_stopped = False

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield KeyedTable(COLUMNS, id="sandboxes", collapse_when_empty=True)
        yield Static("", id="empty", classes="hint")
        yield Static("", id="stream-title", classes="detail")
        yield RichLog(id="lifecycle", max_lines=2000, wrap=False, markup=False, classes="hidden")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(KeyedTable).focus()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#sandboxes", KeyedTable)

    async def load(self) -> None:
        rows = await self.guard(self.backend.sandboxes())
        if rows is None:
            return
        self.rows = {r.id: r for r in rows}
        self.render_rows()

    def render_rows(self) -> None:
        variables = self.app.theme_variables
        visible = [r for r in self.rows.values() if self.show_stopped or r.state not in ("stopped", "destroyed")]
        visible.sort(key=lambda r: r.created_at or "", reverse=True)
        self.table.sync([(r.id, (
            r.id, f.styled(r.state, variables, bold=True), f.truncate(r.spec_id, 12), f.age(r.created_at),
            cpu_cell(r), mem_cell(r), f.truncate(r.image, 30),
        )) for r in visible])
        empty = self.query_one("#empty", Static)
        empty.display = not visible
        empty.update("No live sandboxes." + ("" if self.show_stopped else " (A shows stopped ones too)"))

    def action_refresh(self) -> None:
        self.poll(force=True)

    def action_toggle_all(self) -> None:
        self.show_stopped = not self.show_stopped
        self.render_rows()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_stream()

    def action_stream(self) -> None:
        key = self.table.selected_key
        if not key:
            return
        self.streaming = key
        log = self.query_one("#lifecycle", RichLog)
        log.clear()
        log.remove_class("hidden")
        self.query_one("#stream-title", Static).update(f"lifecycle of {key} (esc closes)")
        self.run_worker(self._stream(key), group="stream", exclusive=True, exit_on_error=False)

    async def _stream(self, sandbox_id: str) -> None:
        log = self.query_one("#lifecycle", RichLog)
        variables = self.app.theme_variables
        try:
            async for event in self.backend.sandbox_events(sandbox_id):
                state = str(event.data.get("state", "")) if event.event_type == "status" else ""
                line = Text(f"{event.event_type:<14}", style=f"bold {f.colour(variables, f.tone_of(state))}")
                line.append(f.truncate(json.dumps(event.data, default=str), 300))
                log.write(line)
            log.write(Text("— stream closed —", style="dim"))
        except DaemonUnreachable:
            self.app.lost_connection()
        except ApiError as exc:
            self.app.report_error(exc, "lifecycle stream")

    def action_back(self) -> None:
        if self.streaming:
            self.workers.cancel_group(self, "stream")
            self.streaming = None
            self.query_one("#lifecycle", RichLog).add_class("hidden")
            self.query_one("#stream-title", Static).update("")

    def action_open_run(self) -> None:
        key = self.table.selected_key
        if key:
            from tui.screens.run import RunScreen

            self.app.push_screen(RunScreen(sandbox_id=key))

    def action_delete(self) -> None:
        key = self.table.selected_key
        if not key:
            return
        from tui.screens.confirm import ConfirmScreen

        async def delete(yes: bool | None) -> None:
            if yes and await self.attempt(self.backend.delete_sandbox(key)):
                self.notify(f"deleted {key}")
                self.poll(force=True)

        self.app.push_screen(ConfirmScreen(f"Delete sandbox {key}? Its containers stop at once."), delete)
