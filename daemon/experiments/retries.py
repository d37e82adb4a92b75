"""Which errored replicas are the infrastructure's fault, and so run again (``scoring.retries``).

A replica is retried, with a new sandbox (a fresh run id) and the same seed, when it errored for
a cause outside both the agent and the spec:

- the sandbox could not boot at a step the spec does not decide (``runtime``: the engine could
  not be reached; ``internal``: the engine answered an error; ``network``: the sandbox network
  could not be made; ``workspace``: the host could not make its workspace, a full disk say);
- the run errored with ``engine_error`` (the daemon's own engine call raised a connection error or
  an engine-side 5xx: ``daemon.sandbox.engine.engine_failure``, by the exception's type), or the node
  it ran on was lost (``node_lost``);
- the scheduler's call of the runner raised such an engine failure;
- the model gateway reports a provider that answered 5xx or 429 (``provider_error``);
- the run *failed* and the daemon saw its connection to the engine break while the agent ran
  (:func:`agent_lost`); the run is then ``errored`` with reason ``infrastructure_error``.

None of it is read from an error message's words: an agent writes those. An agent that stops its
own container fails (the violation ``agent_stopped_container``).

Never retried: an agent timeout, out of memory, a failed check or forbidden rule (``failed`` is
never retried), a spec error (an image that does not exist, a fixture whose SQL fails, a setup
command that fails, a missing secret), a cancelled run, the model budget (``budget_exceeded``)
and a replay that diverged (``replay_diverged``): those are the agent's or the spec's, and
running them again would hide them.

Every retried attempt stays: its run row keeps its verdict and reason, the replica lists it in
``previous_run_ids`` and its scenario counts it in ``retried_runs``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.runner.request import RunOutcome

INFRA_BOOT_STEPS = frozenset({"runtime", "internal", "network", "engine", "node", "workspace"})
INFRA_REASONS = frozenset({"node_lost", "engine_error", "provider_error", "sandbox_lost"})
NEVER = frozenset({"agent_timeout", "agent_oom", "cancelled", "scenario_timeout", "budget_exceeded", "replay_diverged",
                   "agent_unavailable", "workspace_disk_limit", "forbidden_unverifiable", "environment_tampered"})

AGENT_LOST = ("agent_lost: the daemon's connection to the engine broke while the agent ran (an engine restart or "
              "disconnect), so its checks are not the agent's failure")


def infrastructure_cause(status: str | None, error: str | None, run: RunOutcome | None, lost_agent: bool = False,
                         engine_exc: bool = False) -> str | None:
    """Why this errored (or, with ``lost_agent``, failed) replica is the infrastructure's fault (a
    short reason), or None. Decided from what the daemon observed (the step a boot failed at, a
    reason code the runner set from an exception's type or a broken engine connection: the run's
    `agent_engine_lost`; `engine_exc`: the scheduler's call raised an engine failure), never from an
    error message's words, which the agent can write."""
    if status == "failed" and lost_agent:
        return AGENT_LOST
    if status != "errored":
        return None
    if run is None:
        return f"engine_error: {error}" if engine_exc else None
    reason = run.error.code if run.error else run.run.reason
    if reason in NEVER:
        return None
    message = (run.error.message if run.error else None) or error
    if reason in INFRA_REASONS:
        return f"{reason}: {message}"
    if reason == "boot_failed" and run.error is not None and run.error.boot_step in INFRA_BOOT_STEPS:
        sandbox = (run.run.error or {}).get("sandbox_error") or {}
        return f"boot_failed at step '{run.error.boot_step}': {sandbox.get('message') or message}"
    return None


def retries_allowed(spec: Any) -> int:
    scoring = getattr(spec, "scoring", None)
    retries = getattr(scoring, "retries", None)
    return int(getattr(retries, "infrastructure", 2))
