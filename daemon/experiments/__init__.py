"""Replica suites and experiments: the scenario scheduler, the experiment service, metrics and the
comparison / regression gate (issue 6).

- ``scheduler.py`` — one in-process queue of scenario jobs under a global limit, each spec's
  ``resources.concurrency_limit`` and a per-experiment cap, round-robin between experiments.
- ``service.py`` — experiments and replica suites on top of the scheduler: persistence, restart
  recovery, the job function that calls ``daemon.runner.scenario.run_scenario``.
- ``results.py`` — RunResults, scenario and suite bodies built from the stored jobs.
- ``metrics.py`` — ``GET /v1/metrics/experiments/{id}`` and the summary used by compare/history.
- ``compare.py`` — experiment comparison, thresholds and directions.
- ``stats.py`` — Wilson interval, percentiles, replica aggregation.
"""
