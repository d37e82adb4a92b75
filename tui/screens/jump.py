"""`:` — the jump line at the bottom of the screen (k9s style): `:exp NAME`, `:run ID`, `:spec NAME`,
`:sandboxes`, `:launch`, `:watch`. Enter runs it, esc closes."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tui.commands import JUMP_HELP


class JumpScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "close", "Close")]
    DEFAULT_CSS = """
    JumpScreen { align: left bottom; }
    #jump-box { height: auto; width: 100%; background: $surface; border-top: solid $primary; padding: 0 1; }
    #jump-help { color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-box"):
            yield Static(JUMP_HELP, id="jump-help")
            yield Input(placeholder=":exp NAME", id="jump", compact=True)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_close(self) -> None:
        self.dismiss(None)
