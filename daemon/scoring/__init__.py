"""Scoring: invariant checks (``checks/``), forbidden rules (``forbidden/``), the composite score and
verdict (``composite.py``) and replica aggregation (``aggregate.py``)."""
from daemon.scoring.aggregate import aggregate, strategy_passes, wilson_interval  # noqa: F401
from daemon.scoring.composite import RUN_STATUS, Composite, compose, weighted_mean  # noqa: F401
