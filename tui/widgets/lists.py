"""An OptionList that moves like every other list of the TUI (j/k/g/G beside the arrows)."""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import OptionList


class VimOptionList(OptionList):
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "first", "First", show=False),
        Binding("G", "last", "Last", show=False),
    ]
