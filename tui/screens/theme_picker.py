"""Pick a theme with a live preview: moving through the list applies each theme at once; enter
keeps it, esc goes back to the one you had."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

PREFERRED = ("dark", "light", "high-contrast")


class ThemePicker(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "revert", "Cancel")]

    def __init__(self) -> None:
        super().__init__()
        self.original = ""

    def compose(self) -> ComposeResult:
        names = sorted(self.app.available_themes, key=lambda n: (n not in PREFERRED, PREFERRED.index(n) if n in PREFERRED else 0, n))
        with Vertical(id="theme-box", classes="dialog"):
            yield Static("Theme — ↑/↓ preview, enter keeps, esc cancels", classes="dialog-title")
            yield OptionList(*[Option(n, id=n) for n in names], id="themes")

    def on_mount(self) -> None:
        self.original = self.app.theme
        options = self.query_one(OptionList)
        options.highlighted = options.get_option_index(self.original)
        options.focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.app.theme:
            self.app.theme = event.option.id

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.app.theme = event.option.id or self.original
        self.dismiss(self.app.theme)

    def action_revert(self) -> None:
        self.app.theme = self.original
        self.dismiss(None)
