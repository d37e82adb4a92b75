"""The effect ledger: what a run changed outside the agent's own process (database writes, HTTP
calls through the egress proxy, model calls through the gateway, files inside and outside
/workspace, processes), built on read from the run's stored trajectory (`ledger.build`), and
the differences between ledgers: two runs (`diff.diff_runs`) and the runs of one scenario in two
experiments (`replicas.scenario_differences`). Nothing here writes."""
