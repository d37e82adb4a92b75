"""The scheduler moved to :mod:`daemon.runner.engine` (one job engine for runs, replica suites and
experiments); these names stay importable from here."""
from daemon.runner.engine import Job, Requeue, Scheduler, default_global_limit

__all__ = ["Job", "Requeue", "Scheduler", "default_global_limit"]
