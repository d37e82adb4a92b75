"""What the model gateway saw of a run, once its agent has exited: the spend, a refusal that ends
the run (`budget_exceeded`, `replay_diverged`), and the recording kept for replays."""
from __future__ import annotations

import asyncio

from daemon.appkeys import SETTINGS
from daemon.runner.state import ScenarioState
from daemon.sandbox import model_gateway
from daemon.traces import gateway

LAST_LINE_WAIT_S = 0.05  # the gateway writes a call's line just after its last byte reaches the agent


async def settle(s: ScenarioState) -> None:
    if s.manager is None or s.sandbox_id is None or s.spec.models is None:
        return
    runtime = s.manager.runtime(s.sandbox_id)
    if runtime is None:
        return
    state = model_gateway.flush(runtime)
    if state is None:
        return
    await asyncio.sleep(LAST_LINE_WAIT_S)
    await model_gateway.settle_open(runtime)
    await gateway.settle(runtime)
    spend = state.spend()
    budget = s.spec.models.budget.model_dump(exclude_none=True)
    refused = state.refused or {}
    if refused.get("reason") == "budget_exceeded":
        limit, value = refused.get("limit", "?"), refused.get("value", "?")
        s.fail("agent", f"the run's model budget ran out: models.budget.{limit} {value} reached after {spend['calls']} "
                        f"calls, {spend['input_tokens'] + spend['output_tokens']} tokens, ${spend['cost_usd']:.4f}; "
                        "the gateway refused the next call", "budget_exceeded")
        if s.error is not None and s.error.get("code") == "budget_exceeded":
            s.error["spend"] = spend
    elif state.provider_errors and s.agent_outcome is not None and s.agent_outcome.exit_code not in (0, None):
        # the agent gave up because its provider failed: an infrastructure error (experiments retry it)
        s.fail("agent", f"the agent exited with {s.agent_outcome.exit_code} after its model provider failed "
                        f"{state.provider_errors} of {spend['calls']} calls (5xx, 429 or unreachable)", "provider_error")
    elif refused.get("reason") == "replay_diverged":
        s.fail("agent", f"the agent made a model call the recording does not hold (call #{refused.get('seq', '?')}: "
                        f"{refused.get('detail', 'differs')}); replay with ?models=live to ask the providers again",
               "replay_diverged")
    if state.mode == "replay":
        digest = state.recording
    else:
        digest = await asyncio.to_thread(gateway.keep_recording, s.app[SETTINGS], s.tenant_id, state)
    if digest:
        s.pins["model_recording"] = digest
    await s.save(models="replayed" if state.mode == "replay" else "live", model_recording=digest,
                 model_spend={**spend, "budget": budget or None})
