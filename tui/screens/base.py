"""What every svc screen shares: the top bar, the footer, polling in a worker (never blocking the
UI, skipped while the daemon is unreachable or the screen is hidden) and error reporting through
notifications that leave the user where they were."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from client.api import ApiError, DaemonUnreachable
from tui.widgets.footer import SvcFooter
from tui.widgets.topbar import ConnectionBanner, TopBar

if TYPE_CHECKING:
    from tui.app import SvcApp

T = TypeVar("T")


class SvcScreen(Screen):
    CRUMB = ""
    HELP = ""
    POLL_S: float | None = 2.0
    BINDINGS = [Binding("escape", "back", "Back", show=False)]

    if TYPE_CHECKING:
        app: SvcApp  # every svc screen runs in the svc app (connection, backend, report_error)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loading = False
        self.loaded_once = False

    @property
    def backend(self) -> Any:
        return self.app.backend

    def compose_top(self) -> ComposeResult:
        yield TopBar(self.crumb())
        yield ConnectionBanner(classes="banner")

    def compose_bottom(self) -> ComposeResult:
        yield SvcFooter(compact=True)

    def crumb(self) -> str:
        return self.CRUMB

    def on_mount(self) -> None:
        if self.POLL_S:
            self.set_interval(self.POLL_S, self._tick)
        self.call_after_refresh(self.poll)

    def streams_live(self) -> bool:
        """True while the screen's event streams are up and bring every change (it then reloads on
        their events, debounced, and the interval poll stands by); override on screens that follow one."""
        return False

    def _tick(self) -> None:
        if not self.streams_live():
            self.poll()

    def on_screen_resume(self) -> None:
        if self.loaded_once:
            self.poll()

    def poll(self, force: bool = False) -> None:
        """Reload in a worker unless a load is running, the screen is hidden or we are offline."""
        if self._loading or (not force and (not self.is_current or self.app.connection == "reconnecting")):
            return
        self._loading = True
        self.run_worker(self._load_guarded(), group="load", exit_on_error=False)

    async def _load_guarded(self) -> None:
        try:
            await self.guard(self.load())
        finally:
            self._loading = False
            self.loaded_once = True

    async def load(self) -> None:
        """Fetch and show; override."""

    async def guard(self, awaitable: Awaitable[T], *, quiet_404: bool = False) -> T | None:
        """Await an API call; report failures as notifications and return None instead of raising."""
        try:
            return await awaitable
        except DaemonUnreachable:
            self.app.lost_connection()
        except ApiError as exc:
            if not (quiet_404 and exc.status == 404):
                self.app.report_error(exc)
        return None

    async def attempt(self, awaitable: Awaitable[Any]) -> bool:
        """Like `guard` for actions: True when the call succeeded."""
        async def run() -> bool:
            await awaitable
            return True

        return bool(await self.guard(run()))

    def on_reconnected(self) -> None:
        """The daemon answers again (maybe after a restart): reload, restart live streams."""
        self.poll(force=True)

    def set_crumb(self, crumb: str) -> None:
        self.query_one(TopBar).set_crumb(crumb)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def online(self, what: str) -> bool:
        return self.app.online(what)

    def confirm(self, question: str, then) -> None:
        """Ask before starting work (y yes, n or esc no); `then()` runs only on yes."""
        from tui.screens.confirm import ConfirmScreen

        self.app.push_screen(ConfirmScreen(question), lambda yes: then() if yes else None)
