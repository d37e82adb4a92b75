"""Running agents: ``engine`` (the one job engine: limits, tenant fairness, retry, in-memory
secrets; runs, replica suites and experiments are kinds of group on it), ``scenario.run_scenario``
(one scored run; the contract replicas and experiments build on), ``runs.RunService`` (the
``/v1/runs`` kind, cancel, restart recovery), ``records`` (run rows, the Run body, signed trajectory
URLs), ``agent`` (resolving and running the spec's agent) and ``exports`` (teardown exports)."""
