"""Per-key token buckets (30 requests/s sustained, burst 60 by default)."""
from __future__ import annotations

import math
import time


class TokenBuckets:
    def __init__(self, rate_per_s: float, burst: int, clock=time.monotonic):
        self.rate = rate_per_s
        self.burst = burst
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> int:
        """0 when the request may proceed, else the seconds to wait before retrying."""
        if self.rate <= 0:
            return 0
        now = self.clock()
        tokens, last = self.buckets.get(key, (float(self.burst), now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens >= 1:
            self.buckets[key] = (tokens - 1, now)
            return 0
        self.buckets[key] = (tokens, now)
        return max(1, math.ceil((1 - tokens) / self.rate))
