"""daemon.bounded: agent-controlled work runs off the event loop and stops at its time limit."""
from __future__ import annotations

import asyncio
import time

import pytest

from daemon.bounded import WorkTimeout, regex_search, run_bounded
from daemon.scoring.checks.custom import parse_report

BOMB = "a" * 55 + "!"


async def test_a_catastrophic_regex_stops_at_the_limit_and_the_loop_keeps_running():
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    with pytest.raises(WorkTimeout) as caught:  # stopped at the limit (un-stopped, this regex runs for hours)
        await regex_search(r"^(a|aa)+$", BOMB, limit_s=1.0)
    task.cancel()
    assert caught.value.evidence()["timeout"] is True and caught.value.evidence()["time_limit_s"] == 1.0
    assert ticks >= 20  # the loop ran all along (about 100 ticks in a second when it is free)


async def test_regex_search_matches_like_re():
    match = await regex_search(r"world \d+$", "hello\nhello world 42\nbye", limit_s=2)
    assert match.group(0) == "world 42"
    assert await regex_search(r"^nothing$", "something", limit_s=2) is None


async def test_run_bounded_times_out_and_passes_results():
    assert await run_bounded(sum, [1, 2, 3], limit_s=2) == 6
    with pytest.raises(WorkTimeout):
        await run_bounded(time.sleep, 0.5, what="sleeping", limit_s=0.05)


def test_custom_report_parsing_survives_hostile_output():
    nested = '{"passed": true, "x": ' + "[" * 5000 + "]" * 5000 + "}"
    assert parse_report(nested) is None
    assert parse_report("noise\n" * 100_000 + '{"passed": true, "score": 1}') == {"passed": True, "score": 1}
