"""TUI test support: the real daemon app served in-process on a Unix socket (in the test's event
loop), the real `client/` talking to it, the Textual app factory and what the user sees."""
from __future__ import annotations

import os
import shutil
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from aiohttp import web

from client.api import Client
from client.config import ClientConfig, read_env_file
from daemon.app import create_app
from daemon.config import Settings
from tests.support.homes import short_home
from tests.support.specs import hello_yaml
from tests.support.waiting import eventually
from tests.support.waiting import wait_for as _wait_for

__all__ = ["Daemon", "served_daemon", "make_app", "wait_for", "screen_text", "upload_spec", "eventually"]


class Daemon:
    """The real svcd app on a Unix socket; `stop()` / `start()` simulate a daemon restart."""

    def __init__(self, home: Path, socket_path: Path):
        self.home = home
        self.socket_path = socket_path
        self.settings = Settings(home=home, socket_path=socket_path, port=0, rate_limit_per_s=10_000, rate_limit_burst=20_000,
                                 pool_size=0, outbound_allow_private=True)
        self.runner: web.AppRunner | None = None
        self.app: web.Application | None = None

    async def start(self) -> None:
        self.app = create_app(self.settings)
        self.runner = web.AppRunner(self.app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self.runner.setup()
        if self.socket_path.exists():
            self.socket_path.unlink()
        await web.UnixSite(self.runner, str(self.socket_path)).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if self.socket_path.exists():
            self.socket_path.unlink()

    @property
    def key(self) -> str:
        return read_env_file(self.settings.credentials_path)["SERVICE_API_KEY"]

    def config(self) -> ClientConfig:
        return ClientConfig(base_url=f"unix://{self.socket_path}", api_key=self.key, timeout=10.0, home=self.home,
                            api_key_source="test")

    def client(self) -> Client:
        return Client(self.config())


@asynccontextmanager
async def served_daemon(home: Path, socket_prefix: str) -> AsyncIterator[Daemon]:
    """A started Daemon whose socket is in a fresh short /tmp directory (Unix socket paths must stay short)."""
    short = short_home(socket_prefix)
    daemon = Daemon(home, short / "s.sock")
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()
        shutil.rmtree(short, ignore_errors=True)


def make_app(daemon: Daemon, **kwargs: Any):
    from tui.app import SvcApp

    app = SvcApp(daemon.config(), **kwargs)
    app.HEALTH_EVERY_S = 0.2
    app.RETRY_EVERY_S = 0.1
    return app


async def wait_for(pilot, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Let the app run until `predicate()` is truthy."""
    return await _wait_for(predicate, timeout=timeout, what=what, sleep=pilot.pause)


def screen_text(app) -> str:
    """What the user sees: the current screen rendered as plain text."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, record=True, file=open(os.devnull, "w"), color_system=None,
                      legacy_windows=False, force_terminal=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


async def upload_spec(api: Client, spec_id: str, yaml_text: str | None = None) -> dict:
    """Upload through the real client; the default spec's agent writes hello.txt."""
    return await api.post("/v1/specs", {"name": spec_id, "yaml": yaml_text or hello_yaml(spec_id)})
