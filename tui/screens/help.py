"""`?`: context help. The bindings of the screen underneath (and of its focused widget), then the
keys that work everywhere."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


def binding_rows(screen: Screen) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(this screen's keys, everywhere keys) as (keys, description) pairs. The screen's own bindings
    come first (even when a focused table shadows the same key), then its focused widget's; keys
    doing the same thing share a row ("q, ^q  Quit")."""
    app = screen.app
    local: dict[str, list[str]] = {}
    everywhere: dict[str, list[str]] = {
        "Command palette: find experiments, runs, specs by name; every action": ["ctrl+p"],
        "Move in every list, table and tree": ["j/k", "g/G", "home/end", "pgup/pgdn"],
        "Back one screen (or close the filter)": ["esc"],
    }

    def add(target: dict[str, list[str]], binding) -> None:
        if not binding.description or binding.action.startswith(("app.focus_", "screen.copy_text", "command_palette", "app.command_palette")):
            return
        key = binding.key_display or app.get_key_display(binding)
        keys = target.setdefault(binding.description, [])
        if key not in keys:
            keys.append(key)

    for bindings in screen._bindings.key_to_bindings.values():
        for binding in bindings:
            add(local, binding)
    for active in screen.active_bindings.values():
        if active.node is app:
            add(everywhere, active.binding)
        elif active.node is not screen and active.binding.show:
            add(local, active.binding)  # e.g. the trace tree's own keys
    return ([(", ".join(k), d) for d, k in local.items()], [(", ".join(k), d) for d, k in everywhere.items()])


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close help")]

    def __init__(self, target: Screen) -> None:
        super().__init__()
        self.target = target

    def compose(self) -> ComposeResult:
        local, everywhere = binding_rows(self.target)
        title = getattr(self.target, "CRUMB", "") or type(self.target).__name__
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        table.add_row(Text(title, style="bold underline"), "")
        about = getattr(self.target, "HELP", "")
        if about:
            table.add_row("", Text(about, style="italic"))
        for key, text in local:
            table.add_row(key, text)
        table.add_row("", "")
        table.add_row(Text("Everywhere", style="bold underline"), "")
        for key, text in everywhere:
            table.add_row(key, text)
        table.add_row("", "")
        table.add_row("", Text("mouse: click rows, headers (sort) and tabs; esc closes", style="dim"))
        with VerticalScroll(id="help-box"):
            yield Static(table, id="help-body")

    def action_dismiss(self) -> None:
        self.dismiss(None)
