"""The one-line header every screen shows: where you are on the left, the daemon connection on the
right (connected / reconnecting), updated live from `App.connection`."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from tui.format import colour, tone_of

DOTS = {"connected": "●", "reconnecting": "◌", "connecting": "◌", "offline": "○"}


class ConnectionStatus(Static):
    """`● connected` / `◌ reconnecting`, coloured by state."""

    def on_mount(self) -> None:
        self.watch(self.app, "connection", self._show, init=True)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._show(self.app.connection))

    def _show(self, state: str) -> None:
        tint = colour(self.app.theme_variables, tone_of(state))
        self.update(Text(f"{DOTS.get(state, '?')} {state}", style=f"bold {tint}"))


class TopBar(Horizontal):
    def __init__(self, crumb: str) -> None:
        super().__init__(id="topbar")
        self.crumb = crumb

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("svc", "bold"), " ▸ ", self.crumb), id="crumb")
        yield ConnectionStatus(id="connection")

    def set_crumb(self, crumb: str) -> None:
        self.crumb = crumb
        self.query_one("#crumb", Static).update(Text.assemble(("svc", "bold"), " ▸ ", crumb))


class ConnectionBanner(Static):
    """A full-width line under the header while the daemon does not answer: what is wrong, that what
    is shown is as last loaded, and how to get it back. Hidden while connected."""

    def on_mount(self) -> None:
        self.watch(self.app, "connection", self._show, init=True)

    def _show(self, state: str) -> None:
        self.display = state == "reconnecting"
        if self.display:
            url = getattr(getattr(self.app, "config", None), "base_url", "svcd")
            self.update(Text.assemble(("svcd is not answering", "bold"), f" at {url}: what you see is as last loaded; "
                                      "actions wait for it. Retrying every second; ctrl+p → Daemon: start svcd."))
