"""The global limit of runs at once when nobody fixed it (daemon/runner/concurrency.py): it grows by
one while cold boots stay as fast as the fastest the host has shown and runs are waiting, backs off
by a quarter when they slow past twice that, and stays within its floor and ceiling; a spec may say
`resources.concurrency_limit: auto` (the default) or a number, and anything else is refused naming
the field."""
from __future__ import annotations

import pytest

from daemon.runner.concurrency import BOOT_WINDOW, AdaptiveConcurrency, host_bounds
from daemon.spec import SpecValidationError, load_spec


def adaptive(start: int, ceiling: int) -> tuple[AdaptiveConcurrency, list[int]]:
    applied: list[int] = []
    return AdaptiveConcurrency(start, ceiling, applied.append), applied


def boots(limit: AdaptiveConcurrency, ms: int, windows: int, waiting: int = 5) -> None:
    for _ in range(windows * BOOT_WINDOW):
        limit.observe_boot(ms, waiting)


def test_fast_boots_with_runs_waiting_grow_the_limit_up_to_its_ceiling():
    limit, applied = adaptive(2, 4)
    boots(limit, 300, windows=5)
    assert applied == [3, 4]


def test_boots_slowing_past_twice_the_fastest_back_off_by_a_quarter():
    limit, applied = adaptive(8, 8)
    boots(limit, 300, windows=1)
    boots(limit, 900, windows=2)
    assert applied == [6, 5]


def test_fast_boots_with_nothing_waiting_leave_the_limit_alone():
    limit, applied = adaptive(2, 8)
    boots(limit, 300, windows=4, waiting=0)
    assert applied == []


def test_the_limit_never_goes_below_one():
    limit, applied = adaptive(2, 8)
    boots(limit, 100, windows=1, waiting=0)
    boots(limit, 10_000, windows=4)
    assert (min(applied), limit.limit) == (1, 1)


def test_the_host_bounds_start_within_the_sandbox_cap():
    start, ceiling = host_bounds(max_sandboxes=6)
    assert 1 <= start <= 3 and start <= ceiling <= 6


SPEC = """\
version: 1
id: conc
base: docker.io/library/python:3.12-slim
task:
  prompt: hi
agent:
  type: cli
  binary: sh
invariants:
  wrote: {{check: {{type: file_exists, path: out.txt}}}}
resources:
  concurrency_limit: {value}
"""


def test_a_spec_may_leave_concurrency_to_the_daemon_or_fix_it():
    assert [load_spec(SPEC.format(value=v), "conc.yaml").resources.fixed_concurrency for v in ("auto", "3")] == [None, 3]


def test_a_concurrency_limit_that_is_neither_a_number_nor_auto_is_refused_naming_it():
    with pytest.raises(SpecValidationError) as caught:
        load_spec(SPEC.format(value="many"), "conc.yaml")
    assert "conc.yaml:12" in str(caught.value) and "resources.concurrency_limit" in str(caught.value)
