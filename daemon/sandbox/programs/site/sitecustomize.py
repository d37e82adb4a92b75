"""svc's sandbox site customisation. Python finds it through `PYTHONPATH=/svc/site`, which the
daemon sets in a sandbox whose spec has a `determinism:` block. Standard library only.

* `SVC_SEED_RANDOM=1`: seeds the `random` module's global generator from `SERVICE_SEED`, so a
  program that draws random numbers without seeding draws the same ones in every sandbox booted with
  the same seed (`PYTHONHASHSEED` is set by the daemon for the same reason: stable `hash()` and set
  order).
* `SVC_FAKETIME_SLEEP=1` (set with a faked clock): replaces `time.sleep` with a `select`-based
  sleep. Python >= 3.11 sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, which
  libfaketime 0.9.10 mangles when the monotonic clock is not faked (EINVAL; upstream issue 426);
  a relative `select` timeout is passed through untouched.

Then the image's own `sitecustomize` (if any) runs, as it would have without this one.
"""
import os
import sys


def _seed_random() -> None:
    seed = os.environ.get("SERVICE_SEED")
    if seed is None:
        return
    import random

    random.seed(seed)


def _patch_sleep() -> None:
    import select
    import time

    monotonic = time.monotonic

    def sleep(secs: float) -> None:
        secs = float(secs)
        if secs != secs or secs < 0:
            raise ValueError("sleep length must be non-negative")
        deadline = monotonic() + secs
        while True:
            left = deadline - monotonic()
            if left <= 0:
                return
            select.select([], [], [], left)

    sleep.__doc__ = time.sleep.__doc__
    time.sleep = sleep


def _chain() -> None:
    """Run the next `sitecustomize` on sys.path (the image's own), if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or not spec.origin:
        return
    if os.path.dirname(os.path.abspath(spec.origin)) == here:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the image's own hook failing must not break the program
        sys.stderr.write(f"svc sitecustomize: the image's sitecustomize failed: {exc}\n")


if os.environ.get("SVC_FAKETIME_SLEEP") == "1" and sys.version_info >= (3, 11):
    _patch_sleep()
if os.environ.get("SVC_SEED_RANDOM") == "1":
    _seed_random()
_chain()
