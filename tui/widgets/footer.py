"""The footer every screen shows: `? Help` first, then the screen's keys in the order it declares
them, then the keys that work everywhere; when the terminal is too narrow the keys at the end
(the least specific) are dropped, never `? Help` or the palette key. Recomposed only when what it
shows changes (a recompose leaves it empty for a frame)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

HELP_ACTIONS = ("app.help", "help")
PALETTE_WIDTH = 18  # "^p palette" on the right, with its padding


def key_width(display: str, description: str, compact: bool) -> int:
    return len(display) + len(description) + (2 if compact else 3)


class SvcFooter(Footer):
    _shown: tuple = ()

    def chosen(self) -> list[tuple]:
        """(binding, enabled, tooltip) of the keys that fit, in the order shown."""
        entries: list[tuple] = []
        seen: set[str] = set()
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)  # `?` and F1 both open help: the first that is active is named
            entries.append((binding, enabled, tooltip))
        entries.sort(key=lambda e: 0 if e[0].action in HELP_ACTIONS else 1)  # stable: the rest keep their order
        room = max(0, (self.app.size.width or 80) - PALETTE_WIDTH)
        shown = []
        for binding, enabled, tooltip in entries:
            width = key_width(self.app.get_key_display(binding), binding.description, self.compact)
            if width > room:
                break  # what follows is less specific to this screen: dropped, not squeezed
            room -= width
            shown.append((binding, enabled, tooltip))
        return shown

    @staticmethod
    def signature(shown: list[tuple]) -> tuple:
        return tuple((b.key, b.description, b.action, enabled) for b, enabled, _tooltip in shown)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        shown = self.chosen()
        self._shown = self.signature(shown)
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

    def bindings_changed(self, screen: Screen) -> None:
        first = not self._bindings_ready
        self._bindings_ready = True
        if not screen.app.app_focus or not (self.is_attached and screen is self.screen):
            return
        if first or self.signature(self.chosen()) != self._shown:
            self.call_after_refresh(self.recompose)

    def on_resize(self) -> None:
        if self._bindings_ready and self.signature(self.chosen()) != self._shown:
            self.call_after_refresh(self.recompose)
