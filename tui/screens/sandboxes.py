"""Live sandboxes: state, age, CPU and memory (when the daemon reports them) and the node each runs
on; on a swarm, a line above with each node (state, CPUs, what the live sandboxes reserve); open a
sandbox's lifecycle stream; delete one."""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input, Static

from client.api import ApiError, DaemonUnreachable
from tui import format as f
from tui.data import SandboxRow
from tui.screens.base import SvcScreen
from tui.widgets.keyed_table import KeyedTable

if TYPE_CHECKING:
    from daemon.contract.sandboxes import NodeList

COLUMNS = [("id", "Sandbox", 21), ("state", "State", 9), ("spec", "Spec", 12), ("age", "Age", 4),
           ("cpu", "CPU", 5), ("mem", "Mem", 7), ("image", "Image", None), ("node", "Node", None)]


def cpu_cell(r: SandboxRow) -> str:
    """Usage when the daemon reports it, else the limit (`≤1`)."""
    if r.cpu_percent is not None:
        return f"{r.cpu_percent:.0f}%"
    return f.DASH if r.cpu_limit is None else f"≤{r.cpu_limit:g}"


def mem_cell(r: SandboxRow) -> str:
    if r.memory_bytes is not None:
        return f.bytes_(r.memory_bytes)
    return f.DASH if r.memory_limit is None else "≤" + f.bytes_(r.memory_limit)


def nodes_line(nodes: NodeList) -> str:
    """One line for the nodes: `local: 2 CPUs, 1 reserved, 1 sandbox` or, on a swarm, each node."""
    parts = []
    for node in nodes.nodes:
        state = "" if node.state == "ready" and node.availability == "active" else f" {node.state}/{node.availability}"
        unreachable = "" if node.reachable else " (no engine URL)"
        count = f"{node.live_sandboxes} sandbox" + ("" if node.live_sandboxes == 1 else "es")
        parts.append(f"{node.name}{state}{unreachable}: {node.cpus:g} CPUs, {node.reserved_cpus:g} reserved, "
                     f"{f.bytes_(node.memory_bytes - node.reserved_memory_bytes)} memory free, {count}")
    return f"{nodes.runtime} · " + "  │  ".join(parts)


LIFECYCLE_COLUMNS = [("time", "Time", 8), ("kind", "Kind", 8), ("step", "Step", 14), ("message", "Message", None)]
MAX_EVENTS = 2000


def lifecycle_row(event_type: str, data: dict) -> tuple[str, str, str]:
    """One lifecycle event as (kind, step, message): what happened, in words, not the raw JSON."""
    if event_type == "status":
        step = str(data.get("step") or data.get("state") or "")
        message = str(data.get("message") or data.get("detail") or data.get("state") or "")
    elif event_type == "command":
        step = "exit " + str(data["exit_code"]) if data.get("exit_code") is not None else "run"
        message = str(data.get("command") or data.get("cmd") or "")
        if data.get("stdout"):
            message += f"  → {str(data['stdout']).strip()}"
    elif event_type == "audit":
        from tui.data import AuditRow

        row = AuditRow.parse(data, 0)
        step, message = row.type, row.summary
    elif event_type == "trace":
        step = str(data.get("event_type") or "")
        message = " ".join(str(data.get(k)) for k in ("tool", "phase", "status") if data.get(k))
    else:
        step, message = "", json.dumps(data, default=str)
    return event_type, step, " ".join(message.split())


class SandboxesScreen(SvcScreen):
    CRUMB = "Sandboxes"
    HELP = ("Live sandboxes (A: stopped ones too). enter follows the lifecycle stream as a table; d deletes (after you "
            "confirm); o opens its trace and audit log.")
    BINDINGS = [
        Binding("enter", "stream", "Lifecycle"),
        Binding("slash", "search", "Filter", key_display="/"),
        Binding("o", "open_run", "Trace"),
        Binding("A", "toggle_all", "Stopped too"),
        Binding("d", "delete", "Delete…"),
        Binding("ctrl+r", "refresh", "Reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, SandboxRow] = {}
        self.streaming: str | None = None
        self.show_stopped = False
        self.search_text = ""

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Input(placeholder="filter: id, state, spec or image — enter keeps, esc clears", id="filter", classes="hidden", compact=True)
        yield Static("", id="nodes", classes="nodes hidden")
        yield KeyedTable(COLUMNS, id="sandboxes", collapse_when_empty=True)
        yield Static("", id="empty", classes="hint")
        yield Static("", id="stream-title", classes="detail")
        yield KeyedTable(LIFECYCLE_COLUMNS, id="lifecycle", classes="hidden")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(KeyedTable).focus()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#sandboxes", KeyedTable)

    async def load(self) -> None:
        rows = await self.guard(self.backend.sandboxes(stopped=self.show_stopped))
        if rows is None:
            return
        self.rows = {r.id: r for r in rows}
        self.render_rows()
        nodes = await self.guard(self.backend.nodes())
        if nodes is not None:
            line = self.query_one("#nodes", Static)
            line.set_class(nodes.runtime == "docker", "hidden")  # one node, this machine: the Node column says it
            line.update(f.plain(nodes_line(nodes)))

    def render_rows(self) -> None:
        variables = self.app.theme_variables
        needle = self.search_text.lower().strip()
        visible = [r for r in self.rows.values() if (self.show_stopped or r.state not in ("stopped", "destroyed"))
                   and (not needle or needle in f"{r.id} {r.state} {r.spec_id} {r.image}".lower())]
        visible.sort(key=lambda r: r.created_at or "", reverse=True)
        self.table.sync([(r.id, (
            r.id, f.styled(r.state, variables, bold=True), f.truncate(r.spec_id, 12), f.age(r.created_at),
            cpu_cell(r), mem_cell(r), f.truncate(r.image, 30), f.truncate(r.node, 24) or f.DASH,
        )) for r in visible])
        empty = self.query_one("#empty", Static)
        empty.display = not visible
        empty.update("No sandboxes at all." if self.show_stopped else "No live sandboxes. (A shows stopped ones too)")

    def action_refresh(self) -> None:
        self.poll(force=True)

    def action_toggle_all(self) -> None:
        self.show_stopped = not self.show_stopped
        self.notify("showing stopped sandboxes too" if self.show_stopped else "showing live sandboxes", timeout=2)
        self.poll(force=True)  # the daemon lists stopped ones only when asked

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_stream()

    def action_stream(self) -> None:
        key = self.table.selected_key
        if not key:
            return
        self.streaming = key
        log = self.query_one("#lifecycle", KeyedTable)
        log.clear_rows()
        log.remove_class("hidden")
        self.query_one("#stream-title", Static).update(f.plain(f"lifecycle of {key} (esc closes)"))
        self.run_worker(self._stream(key), group="stream", exclusive=True, exit_on_error=False)

    async def _stream(self, sandbox_id: str) -> None:
        log = self.query_one("#lifecycle", KeyedTable)
        variables = self.app.theme_variables
        count = 0
        try:
            async for event in self.backend.sandbox_events(sandbox_id):
                kind, step, message = lifecycle_row(event.event_type, event.data)
                state = str(event.data.get("state", "")) if kind == "status" else ""
                count += 1
                log.add_row(time.strftime("%H:%M:%S"), Text(kind, style=f"bold {f.colour(variables, f.tone_of(state))}"),
                            f.plain(f.truncate(step, 14)), f.plain(message), key=f"e{count}")
                if log.row_count > MAX_EVENTS:
                    log.remove_row(log.ordered_rows[0].key)
                log.move_cursor(row=log.row_count - 1)
            self.query_one("#stream-title", Static).update(f.plain(f"lifecycle of {sandbox_id}: stream closed (esc closes)"))
        except DaemonUnreachable:
            self.app.lost_connection()
        except ApiError as exc:
            self.app.report_error(exc, "lifecycle stream")

    def action_search(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("hidden")
        box.focus()

    @on(Input.Changed, "#filter")
    def _search_changed(self, event: Input.Changed) -> None:
        self.search_text = event.value
        self.render_rows()

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
        if self.streaming:
            self.workers.cancel_group(self, "stream")
            self.streaming = None
            self.query_one("#lifecycle", KeyedTable).add_class("hidden")
            self.query_one("#stream-title", Static).update("")
            self.table.focus()

    def action_open_run(self) -> None:
        key = self.table.selected_key
        if key:
            from tui.screens.run import RunScreen

            self.app.push_screen(RunScreen(sandbox_id=key))

    def action_delete(self) -> None:
        key = self.table.selected_key
        if not key or not self.online("delete"):
            return
        from tui.screens.confirm import ConfirmScreen

        async def delete(yes: bool | None) -> None:
            if yes and await self.attempt(self.backend.delete_sandbox(key)):
                self.notify(f"deleted {key}")
                self.poll(force=True)

        self.app.push_screen(ConfirmScreen(f"Delete sandbox {key}? Its containers stop at once."), delete)
