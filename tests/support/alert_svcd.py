"""A real svcd that retries alert deliveries quickly, and a wait for a resource's deliveries to be
sent, for the tests that SIGKILL it while a notice is in flight."""
from __future__ import annotations

import asyncio

from tests.support.procs import SvcdProcess


class FastRetrySvcd(SvcdProcess):
    def env(self) -> dict[str, str]:
        return {**super().env(), "SERVICE_ALERT_RETRY_BASE_S": "0.05"}


async def all_sent(svcd: SvcdProcess, deliveries_path: str, timeout: float) -> list[dict]:
    """The deliveries at `deliveries_path` (e.g. /v1/alerts/<id>/deliveries) once there are some and all are sent."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        status, page = await svcd.request("GET", deliveries_path)
        if status == 200 and page["items"] and all(d["status"] == "sent" for d in page["items"]):
            return page["items"]
        assert loop.time() < deadline, f"not sent: {page}"
        await asyncio.sleep(0.1)
