"""The route table every client calls through: daemon/contract/routes.py, loaded on first use.

    from client.routes import R
    run = await client.call(R.GET_RUN, run_id=run_id)

`R.NAME` imports the table when first read, not when a module that uses it is imported, so the TUI
and the CLI still load nothing of daemon/ until they send a request (tests/tui/test_boundaries.py).
No client writes a /v1 path itself (tests/unit/test_route_table.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["R"]


class _Table:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from daemon.contract import routes

        return getattr(routes, name)

    def __dir__(self) -> list[str]:
        from daemon.contract import routes

        return [route.name.upper() for route in routes.ALL]


if TYPE_CHECKING:
    from daemon.contract import routes as R
else:
    R = _Table()
