"""How many scenario runs go at once when nobody fixed it (`resources.concurrency_limit: auto`, the
default, and no SERVICE_MAX_CONCURRENT_RUNS): `AdaptiveConcurrency`, the job engine's global limit.

It starts from what the host holds (its cores, its free memory at PER_SANDBOX_MIB a sandbox, the
daemon's SERVICE_MAX_SANDBOXES) and then follows the cold boots it is told about (the runner reports
each one): boots are the part of a run that competes for the host, so their time says whether more
runs at once still pay. The fastest median of BOOT_WINDOW boots seen so far is the host's baseline;
when the recent median is over SLOWER x the baseline the limit backs off by a quarter (at least
one), and while it stays under FASTER x the baseline with runs waiting it grows by one, up to the
ceiling (2 x cores, the memory bound, SERVICE_MAX_SANDBOXES). Every change is logged and goes to the
scheduler at once; each job row keeps the limit it started under (`scenario_jobs.concurrency`), so a
result says what was chosen."""
from __future__ import annotations

import logging
import os
import statistics
from collections import deque
from typing import Callable

log = logging.getLogger("svcd.engine")

PER_SANDBOX_MIB = 256  # what a trivial sandbox holds at rest (agent, proxy, keep-alive), with room
BOOT_WINDOW = 4
SLOWER = 2.0
FASTER = 1.3


def host_bounds(max_sandboxes: int) -> tuple[int, int]:
    """(start, ceiling) for this host: the start is today's fixed default (cores, half the sandbox
    cap); the ceiling also lets the limit go past the cores while boots stay fast, within memory."""
    cores = os.cpu_count() or 1
    by_memory = max_sandboxes
    try:
        import psutil

        by_memory = max(1, int(psutil.virtual_memory().available // (PER_SANDBOX_MIB * 1024 * 1024)))
    except Exception:  # noqa: BLE001 - no reading: the sandbox cap bounds it alone
        pass
    start = max(1, min(cores, max_sandboxes // 2, by_memory))
    ceiling = max(start, min(2 * cores, max_sandboxes, by_memory))
    return start, ceiling


class AdaptiveConcurrency:
    def __init__(self, start: int, ceiling: int, apply: Callable[[int], None], floor: int = 1):
        self.limit = max(floor, min(start, ceiling))
        self.floor = floor
        self.ceiling = ceiling
        self.apply = apply
        self.recent: deque[int] = deque(maxlen=BOOT_WINDOW)
        self.baseline: float | None = None
        self.changes = 0

    def observe_boot(self, boot_ms: int, waiting: int) -> None:
        """A cold boot took `boot_ms`; `waiting` runs are queued behind the limit."""
        self.recent.append(max(1, boot_ms))
        if len(self.recent) < BOOT_WINDOW:
            return
        median = statistics.median(self.recent)
        if self.baseline is None or median < self.baseline:
            self.baseline = median
        if median > SLOWER * self.baseline and self.limit > self.floor:
            self._set(max(self.floor, self.limit - max(1, self.limit // 4)), f"boots slowed to {median:.0f} ms "
                                                                             f"(fastest {self.baseline:.0f} ms)")
        elif median < FASTER * self.baseline and waiting > 0 and self.limit < self.ceiling:
            self._set(self.limit + 1, f"boots stay fast ({median:.0f} ms) with {waiting} run(s) waiting")

    def _set(self, limit: int, why: str) -> None:
        log.info("concurrency %d -> %d: %s", self.limit, limit, why)
        self.limit = limit
        self.changes += 1
        self.recent.clear()  # the next window is measured under the new limit
        self.apply(limit)
