"""The client's retry delays: exponential with jitter, never below the server's Retry-After."""
from __future__ import annotations

from client.api import BACKOFF_BASE_S, BACKOFF_CAP_S, backoff_delay


def test_delays_grow_exponentially_within_their_jitter_band():
    for attempt in range(4):
        ceiling = BACKOFF_BASE_S * 2 ** attempt
        delays = {backoff_delay(attempt) for _ in range(200)}
        assert ceiling / 2 <= min(delays) and max(delays) <= ceiling


def test_delays_are_jittered():
    assert len({backoff_delay(3) for _ in range(50)}) > 1


def test_delays_stop_growing_at_the_cap():
    assert max(backoff_delay(30) for _ in range(200)) <= BACKOFF_CAP_S


def test_retry_after_is_the_floor():
    assert backoff_delay(0, retry_after=3.0) == 3.0
