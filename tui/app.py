"""`SvcApp`: the Textual application. It owns the connection to the daemon (through `client/` only;
never `daemon/`), the themes, the modes (experiments, sandboxes, launch, watch), notifications and
reconnection after a daemon restart."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Iterable

from textual.app import App, SystemCommand
from textual.notifications import SeverityLevel
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen

from client.api import ApiError, Client, DaemonUnreachable
from client.config import ClientConfig
from tui.backend import Backend, route_missing
from tui.commands import SvcCommands
from tui.themes import choose, load_themes
from tui.watch import ApiLauncher, WatchEngine, WatchEvent

APP_CSS = Path(__file__).with_name("app.tcss")
NOTIFY_DEDUP_S = 15.0


def _dashboard() -> Screen:
    from tui.screens.dashboard import DashboardScreen
    return DashboardScreen()


def _sandboxes() -> Screen:
    from tui.screens.sandboxes import SandboxesScreen
    return SandboxesScreen()


def _launch() -> Screen:
    from tui.screens.launch import LaunchScreen
    return LaunchScreen()


def _watch() -> Screen:
    from tui.screens.watch import WatchScreen
    return WatchScreen()


class SvcApp(App):
    TITLE = "svc"
    COMMANDS = {SvcCommands}  # things by name first, then keys, then Textual's own commands
    MODES = {"experiments": _dashboard, "sandboxes": _sandboxes, "launch": _launch, "watch": _watch}
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f1", "help", "Help", key_display="F1"),  # `?` types into a focused text box; F1 never does
        Binding("colon", "jump", "Jump", key_display=":"),
        Binding("e", "home", "Experiments"),
        Binding("s", "goto('sandboxes')", "Sandboxes"),
        Binding("l", "goto('launch')", "Launch"),
        Binding("w", "watch", "Watch"),
        Binding("t", "pick_theme", "Theme", show=False),
        Binding("q", "quit", "Quit"),
    ]
    HEALTH_EVERY_S = 2.0
    RETRY_EVERY_S = 1.0

    connection: reactive[str] = reactive("connecting")

    def __init__(self, config: ClientConfig, *, theme: str | None = None, backend: Backend | None = None,
                 watch_spec: Path | None = None, start_mode: str = "experiments") -> None:
        themes, theme_css = load_themes(config.home)
        super().__init__(css_path=[APP_CSS, *theme_css])
        for custom in themes.values():
            self.register_theme(custom)
        self.config = config
        self.backend = backend or Backend(Client(config))
        self.theme = choose(theme, self.available_themes)
        self.watcher: WatchEngine | None = None
        self.watch_spec = watch_spec
        self.start_mode = start_mode
        self.startup_notice: str | None = None  # e.g. why autostarting the daemon failed
        self._recent: dict[str, float] = {}
        self.lost_at: float | None = None  # when the daemon stopped answering (monotonic)

    # --- lifecycle ----------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._theme_class(self.theme)
        self.theme_changed_signal.subscribe(self, lambda theme: self._theme_class(theme.name))
        self.run_worker(self._monitor(), group="monitor", exit_on_error=False)
        self.switch_mode(self.start_mode)
        if self.startup_notice:
            self.notify(self.startup_notice, severity="error", timeout=10)
        if self.watch_spec is not None:
            self.start_watch(self.watch_spec)

    async def on_unmount(self) -> None:
        if self.watcher is not None:  # stop watching: the run in flight is cancelled first
            self.watcher.stop()
            worker = getattr(self, "_watch_worker", None)
            if worker is not None:
                try:
                    await asyncio.wait_for(worker.wait(), 10)
                except Exception:
                    pass
        await self.backend.reset()

    def _theme_class(self, name: str) -> None:
        for cls in [c for c in self.classes if c.startswith("theme-")]:
            self.remove_class(cls)
        self.add_class(f"theme-{name}")

    # --- connection ---------------------------------------------------------------------------------
    async def _monitor(self) -> None:
        """Ping /health: connected every HEALTH_EVERY_S, reconnecting every RETRY_EVERY_S."""
        while True:
            try:
                await self.backend.health()
                ok = True
            except (DaemonUnreachable, ApiError, OSError, asyncio.TimeoutError):
                ok = False
            if ok and self.connection != "connected":
                was = self.connection
                self.lost_at = None
                self.connection = "connected"
                if was == "reconnecting":
                    self.notify("reconnected to svcd", timeout=3)
                    for screen in self._all_screens():
                        if hasattr(screen, "on_reconnected"):
                            screen.on_reconnected()
            elif not ok:
                self.lost_connection()
            await asyncio.sleep(self.HEALTH_EVERY_S if ok else self.RETRY_EVERY_S)

    def lost_connection(self) -> None:
        if self.lost_at is None:
            self.lost_at = time.monotonic()
        if self.connection == "connected":
            self.connection = "reconnecting"
            self.notify(f"lost svcd at {self.config.base_url}; reconnecting…", severity="warning", timeout=4)
            self.run_worker(self.backend.reset(), group="reset", exit_on_error=False)
        elif self.connection == "connecting":
            self.connection = "reconnecting"

    def _all_screens(self) -> Iterable[Screen]:
        seen = set()
        for stack in self._screen_stacks.values():
            for screen in stack:
                if id(screen) not in seen:
                    seen.add(id(screen))
                    yield screen

    # --- notifications ------------------------------------------------------------------------------
    def report_error(self, exc: ApiError, context: str = "") -> None:
        """An API error as a notification (the same one at most every NOTIFY_DEDUP_S)."""
        message = str(exc.body.get("message") or exc.code)
        if route_missing(exc):
            message = f"this svcd does not serve that yet ({message})"
        errors = (exc.details or {}).get("errors") if isinstance(exc.details, dict) else None
        for issue in (errors or [])[:3]:
            where = f"line {issue['line']} " if isinstance(issue, dict) and issue.get("line") else ""
            message += f"\n{where}{issue.get('loc', '') if isinstance(issue, dict) else ''}: {issue.get('msg', '') if isinstance(issue, dict) else issue}"
        self.notify_once(message, title=f"{context + ': ' if context else ''}{exc.status} {exc.code}", severity="error")

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Every notification as typed, never as markup (screens' `notify` lands here too): they quote
        daemon errors, run errors and forbidden-rule messages, which carry agent text."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def notify_once(self, message: str, *, title: str = "", severity: str = "information", timeout: float = 6) -> None:
        key = f"{title}|{message}"
        now = time.monotonic()
        if now - self._recent.get(key, -1e9) < NOTIFY_DEDUP_S:
            return
        self._recent[key] = now
        self.notify(message, title=title, severity=severity, timeout=timeout)  # type: ignore[arg-type]

    def online(self, what: str) -> bool:
        """True when the daemon answers; otherwise says that `what` cannot happen now."""
        if self.connection == "connected":
            return True
        self.notify(f"svcd at {self.config.base_url} is not answering: {what} not done. It retries on its own; "
                    "ctrl+p → Daemon: start svcd starts it.", title="svcd unreachable", severity="error", timeout=5)
        return False

    # --- actions ------------------------------------------------------------------------------------
    def action_goto(self, mode: str) -> None:
        if self.current_mode != mode:
            self.switch_mode(mode)

    def action_home(self) -> None:
        """The dashboard, from anywhere: leaves the screens opened on top of it."""
        if self.current_mode != "experiments":
            self.switch_mode("experiments")
        while len(self.screen_stack) > 1 and not getattr(self.screen_stack[-1], "IS_HOME", False):
            self.pop_screen()

    def action_jump(self) -> None:
        from tui.commands import jump
        from tui.screens.jump import JumpScreen

        async def run(line: str | None) -> None:
            if line:
                problem = await jump(self, line)
                if problem:
                    self.notify(problem, title=f"“{line}”", severity="warning", timeout=5)

        if not isinstance(self.screen, JumpScreen):
            self.push_screen(JumpScreen(), lambda line: self.run_worker(run(line), group="jump", exit_on_error=False))

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_pick_theme(self) -> None:
        from tui.screens.theme_picker import ThemePicker

        self.push_screen(ThemePicker())

    def action_watch(self) -> None:
        if self.watcher is not None:
            self.action_goto("watch")
            return
        self.action_goto("launch")
        self.notify("pick a spec file, then press w (or ctrl+w) to watch it", timeout=4)

    def action_start_daemon(self) -> None:
        from client import daemonctl

        async def start() -> None:
            try:
                await asyncio.to_thread(daemonctl.start, self.config)
                self.notify("svcd started")
            except RuntimeError as exc:
                self.notify(str(exc), title="could not start svcd", severity="error")

        self.run_worker(start(), group="daemon", exit_on_error=False)

    def action_reconnect(self) -> None:
        self.run_worker(self.backend.reset(), group="reset", exit_on_error=False)
        for screen in self._all_screens():
            if hasattr(screen, "on_reconnected"):
                screen.on_reconnected()

    # --- watch mode ---------------------------------------------------------------------------------
    def start_watch(self, spec: Path, **launch_options) -> WatchEngine:
        if self.watcher is not None:
            self.watcher.stop()
        launcher = ApiLauncher(self.backend.client, **launch_options)
        engine = WatchEngine(spec, launcher, on_event=self._on_watch_event)
        self.watcher = engine
        self._watch_worker = self.run_worker(engine.run(), group="watch", exclusive=True, exit_on_error=False)
        self.action_goto("watch")
        return engine

    def stop_watch(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.notify(f"stopped watching {self.watcher.spec.name}")

    def _on_watch_event(self, event: WatchEvent) -> None:
        from tui.screens.watch import WatchScreen

        for screen in self._all_screens():
            if isinstance(screen, WatchScreen):
                screen.add_event(event)
        if event.kind in ("invalid", "error"):
            self.notify_once(event.message, title="watch", severity="error")

    # --- palette ------------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):
            if command.title == "Quit":  # Textual's others (keys, maximize, screenshot) are not svc's
                yield command
        yield SystemCommand("Theme: choose (live preview)", "Move through the themes to preview them; enter keeps one", self.action_pick_theme)
        for name in sorted(self.available_themes):
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme", lambda n=name: setattr(self, "theme", n))
        yield SystemCommand("Daemon: start svcd", "Start the local daemon in the background", self.action_start_daemon)
        yield SystemCommand("Daemon: reconnect now", "Drop connections and reload every screen", self.action_reconnect)
        if self.watcher is not None:
            yield SystemCommand("Watch: stop", f"Stop watching {self.watcher.spec.name}", self.stop_watch)
