"""Which errored replicas are the infrastructure's fault, and so run again (``scoring.retries``).

A replica is retried, with a new sandbox (a fresh run id) and the same seed, when it errored for
a cause outside both the agent and the spec:

- the sandbox could not boot at a step the spec does not decide (``runtime``: the engine could
  not be reached; ``internal``: the engine answered an error; ``network``: the sandbox network
  could not be made), or its error names an engine failure;
- the run errored at any other step (``internal_error``, ``agent_leftovers``, ...) with an error
  naming an engine or connection failure, or the node it ran on was lost (``node_lost``);
- the scheduler's call of the runner raised an engine or connection error;
- the model gateway reports a provider that answered 5xx or 429 (``provider_error``).

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


def infrastructure_cause(status: str | None, error: str | None, run: Any) -> str | None:
    """Why this errored replica is the infrastructure's fault (a short reason), or None."""
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
