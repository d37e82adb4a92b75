"""Running agents: ``scenario.run_scenario`` (one scored run; the contract replicas and experiments
build on), ``runs.RunService`` (the ``/v1/runs`` queue, cancel, restart recovery), ``records``
(run rows, the Run body, signed trajectory URLs), ``agent`` (resolving and running the spec's
agent) and ``exports`` (teardown exports)."""
