"""Which errored replicas are the infrastructure's fault, and so run again (``scoring.retries``).

A replica is retried, with a new sandbox (a fresh run id) and the same seed, when it errored for
a cause outside both the agent and the spec:

- the sandbox could not boot at a step the spec does not decide (``runtime``: the engine could
  not be reached; ``internal``: the engine answered an error; ``network``: the sandbox network
  could not be made), or its error names an engine failure;
- the run errored at any other step (``internal_error``, ``agent_leftovers``, ...) with an error
  naming an engine or connection failure, or the node it ran on was lost (``node_lost``);
- the scheduler's call of the runner raised an engine or connection error;
- the model gateway reports a provider that answered 5xx or 429 (``provider_error``);
- the run *failed* but its agent ended without an exit status (:func:`agent_lost`): the engine
  lost the agent's process (restart, disconnect) or its container was stopped from outside; the
  run is then ``errored`` with reason ``infrastructure_error``, never ``failed``.

Never retried: an agent timeout, out of memory, a failed check or forbidden rule (``failed`` is
never retried), a spec error (an image that does not exist, a fixture whose SQL fails, a setup
command that fails, a missing secret), a cancelled run, the model budget (``budget_exceeded``)
and a replay that diverged (``replay_diverged``): those are the agent's or the spec's, and
running them again would hide them.

Every retried attempt stays: its run row keeps its verdict and reason, the replica lists it in
``previous_run_ids`` and its scenario counts it in ``retried_runs``.
"""
from __future__ import annotations

from typing import Any

from daemon.store.db import loads

INFRA_BOOT_STEPS = frozenset({"runtime", "internal", "network", "engine", "node"})
INFRA_REASONS = frozenset({"node_lost", "engine_error", "provider_error", "sandbox_lost"})
NEVER = frozenset({"agent_timeout", "agent_oom", "cancelled", "scenario_timeout", "budget_exceeded", "replay_diverged",
                   "agent_unavailable", "workspace_disk_limit", "forbidden_unverifiable"})
# Words of an engine or transport failure, as Docker's SDK, requests/urllib3 and aiohttp say them.
ENGINE_MARKERS = ("cannot reach the docker engine", "connection refused", "connection aborted", "connectionerror",
                  "connection reset", "remotedisconnected", "server disconnected", "500 server error", "502 server error",
                  "503 server error", "is dockerd running", "error while fetching server api version", "broken pipe",
                  "no such container", "is not running", "node lost", "was lost")


def _engine_words(text: Any) -> bool:
    lowered = str(text or "").lower()
    return any(marker in lowered for marker in ENGINE_MARKERS)


AGENT_LOST = ("agent_lost: the agent's process ended without an exit status: the engine lost it (an engine restart or "
              "disconnect) or its container was stopped from outside, so its checks are not the agent's failure")


async def agent_lost(store: Any, run_id: str) -> bool:
    """The run's agent ended without an exit status, which an agent cannot do by itself: its exec
    (or container) was lost by the engine. A spec without an agent, or an agent killed at its
    timeout, does not count."""
    from daemon.store import runs as run_store

    row = await run_store.get(store, run_id)
    result = loads(row["result"], {}) if row is not None else {}
    if not isinstance(result, dict) or "agent_exit_code" not in result:
        return False
    agent = result.get("agent") if isinstance(result.get("agent"), dict) else {}
    return result["agent_exit_code"] is None and agent.get("type") not in (None, "none")


def infrastructure_cause(status: str | None, error: str | None, run: Any, lost_agent: bool = False) -> str | None:
    """Why this errored (or, with ``lost_agent``, failed) replica is the infrastructure's fault (a
    short reason), or None."""
    if status == "failed" and lost_agent:
        return AGENT_LOST
    if status != "errored":
        return None
    if not isinstance(run, dict):
        return f"engine_error: {error}" if _engine_words(error) else None
    details = run.get("error") if isinstance(run.get("error"), dict) else {}
    reason = details.get("code") or run.get("reason")
    if reason in NEVER:
        return None
    message = details.get("message") or error
    if reason in INFRA_REASONS:
        return f"{reason}: {message}"
    if reason == "boot_failed":
        sandbox = details.get("sandbox_error") if isinstance(details.get("sandbox_error"), dict) else {}
        step = sandbox.get("step")
        if step in INFRA_BOOT_STEPS or _engine_words(sandbox.get("message")):
            return f"boot_failed at step '{step}': {sandbox.get('message') or message}"
        return None
    if _engine_words(message):  # e.g. agent_leftovers or internal_error: the engine failed under the step
        return f"{reason or 'error'}: {message}"
    return None


def retries_allowed(spec: Any) -> int:
    scoring = getattr(spec, "scoring", None)
    retries = getattr(scoring, "retries", None)
    return int(getattr(retries, "infrastructure", 2))
