"""Replica suites and experiments: two kinds of group run by the daemon's one job engine
(:mod:`daemon.runner.engine`), their metrics and the comparison / regression gate.

- ``groups.py`` — what both kinds share: the group context, its failure, the replica event, the
  hooks a kind implements and what it may use of the service.
- ``service.py`` — the service over both kinds: restart recovery, the job function that calls
  ``daemon.runner.scenario.run_scenario``, experiment creation, run, cancel and RunResults, suite
  creation, group completion (the ``done`` event, closing the stream, forgetting the group).
- ``experiment_kind.py`` — the experiment kind: scenario rows, the experiment stream, summary and
  completed hooks.
- ``suites.py`` — the suite kind: body, completion (``replica.completed``).
- ``core.py`` — what creation checks first: matrix entries, the failing entries of a re-run.
- ``results.py`` — RunResults, scenario and suite bodies built from the stored jobs.
- ``metrics.py`` — ``GET /v1/metrics/experiments/{id}`` and the summary used by compare/history.
- ``compare.py`` — experiment comparison, thresholds and directions.
- ``stats.py`` — Wilson interval, percentiles, replica aggregation.

Their SQL is in ``daemon/store/experiments.py`` (experiments, scenarios, suites) and
``daemon/store/jobs.py`` (the persisted jobs).
"""
