"""The footer every screen shows: `? Help` first, then the screen's keys in the order it declares
them, then the keys that work everywhere; when the terminal is too narrow the keys at the end
(the least specific) are dropped, never `? Help` or the palette key."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

HELP_ACTION = "app.help"
PALETTE_WIDTH = 18  # "^p palette" on the right, with its padding


def key_width(display: str, description: str, compact: bool) -> int:
    return len(display) + len(description) + (2 if compact else 3)


class SvcFooter(Footer):
    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        entries: list[tuple] = []
        seen: set[str] = set()
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            entries.append((binding, enabled, tooltip))
        entries.sort(key=lambda e: 0 if e[0].action in (HELP_ACTION, "help") else 1)  # stable: the rest keep their order
        # `?` and F1 both open help: the footer names one, `?` unless a text box takes it
        room = max(0, (self.app.size.width or 80) - PALETTE_WIDTH)
        shown = []
        for binding, enabled, tooltip in entries:
            width = key_width(self.app.get_key_display(binding), binding.description, self.compact)
            if width > room:
                break  # what follows is less specific to this screen: dropped, not squeezed
            room -= width
            shown.append((binding, enabled, tooltip))
        self.styles.grid_size_columns = len(shown)
        for binding, enabled, tooltip in shown:
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = self.screen.active_bindings[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                return
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            classes="-command-palette", disabled=not enabled,
                            tooltip=binding.tooltip or binding.description)

    def on_resize(self) -> None:
        self.call_after_refresh(self.recompose)
