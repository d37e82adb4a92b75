"""Runs: creation, replay, the Run record, list query and stream events."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from daemon.contract.common import EnvCheck, JsonValue, PageQuery, Response
from daemon.contract.specs import SPEC_ID_MAX, SPEC_ID_PATTERN


SHA256_PATTERN = r"^(sha256:)?[0-9a-f]{64}$"


class RunPins(BaseModel):
    """What a reproducer pins: the agent snapshot the source run resolved and its model recording."""
    model_config = ConfigDict(extra="forbid")
    agent_snapshot_id: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$",
                                          description="run this snapshot, not the latest of the spec's agent.snapshot name")
    model_recording: str | None = Field(default=None, pattern=SHA256_PATTERN,
                                        description="the model gateway answers from this recording (no provider is called)")


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spec_id: str = Field(min_length=1, max_length=SPEC_ID_MAX, pattern=SPEC_ID_PATTERN)
    spec_version: int | None = Field(default=None, ge=1, description="default: the latest version")
    sandbox_id: str | None = Field(default=None, description="run in this live sandbox instead of a fresh one")
    seed: str | None = Field(default=None, max_length=200, description="replays a prior run; default: the spec's determinism.seed, else random")
    inputs: dict[str, JsonValue] | None = Field(default=None, description="values for {{ name }} in the task prompt")
    matrix_entry: dict[str, JsonValue] | None = Field(default=None, description="matrix parameters (a reproducer sets them)")
    secrets: Annotated[dict[str, str] | None, EnvCheck] = Field(default=None, description="secret values for this run (memory only)")
    pins: RunPins | None = Field(default=None, description="a reproducer's pinned agent snapshot and model recording")

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class ReplayBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    secrets: Annotated[dict[str, str] | None, EnvCheck] = None


class ReplayQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: Literal["recorded", "live"] = Field(
        default="recorded", description="recorded (default): the model gateway serves the source run's recorded answers "
                                        "when it has a recording; live: ask the providers again")


class InvariantResult(Response):
    """One invariant's result; checks may add their own keys (kept, documented as additional)."""
    model_config = ConfigDict(extra="allow")
    invariant_id: str
    name: str | None = None
    status: str = Field(description="passed | failed | skipped")
    score: float | None = None
    weight: float | None = None
    gate: bool | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)


class RunModels(Response):
    mode: Literal["live", "replayed"] = Field(description="live: the providers answered; replayed: the recording did")
    recording: str | None = Field(default=None, description="sha256 of the model recording the run made or replayed")
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = Field(default=0, description="answered calls with no tokens to price (not in cost_usd)")
    estimated_calls: int = Field(default=0, description="calls whose provider reported no usage (a cut stream): "
                                                        "counted with an estimate, a token per 4 bytes sent and received")
    highest_priced_calls: int = Field(default=0, description="calls of a model in no pricing table: counted at the "
                                                             "highest known price (SERVICE_PRICING_FILE adds models)")
    truncated_calls: int = Field(default=0, description="calls recorded as metadata only: the run's model recording "
                                                        "reached its size cap (SERVICE_GATEWAY_MAX_RECORDING)")
    unfinished_calls: int = Field(default=0, description="calls still in flight when the agent was done: counted "
                                                         "at what they held (prompt and max_tokens, priced)")
    budget: dict[str, Any] | None = Field(default=None, description="the spec's models.budget")


class Run(Response):
    id: str
    sandbox_id: str | None
    spec_id: str
    spec_version: int
    status: str = Field(description="queued | running | passed | failed | errored")
    verdict: str | None = Field(description="pass | fail | error once finished")
    reason: str | None
    score: float | None
    invariant_results: list[InvariantResult]
    forbidden_results: list[dict[str, Any]]
    violations: list[dict[str, Any]] = Field(description="each {rule, code: invariant_violation, source, message, event}")
    trajectory_url: str | None = Field(description="signed, expiring; works without the API key")
    seed: str
    inputs: dict[str, Any] | None
    matrix_entry: dict[str, Any] | None
    experiment_id: str | None
    scenario_id: str | None
    replay_of: str | None
    agent: dict[str, Any] | None
    error: dict[str, Any] | None = Field(description="{step, message, code} when errored")
    reproducer: dict[str, Any] | None = Field(description="{command, seed, spec_id, spec_version, inputs, matrix_entry, dataset, pins}; dataset is {id, version, record_id} of a dataset scenario; pins {agent_snapshot_id, model_recording} are what the run resolved")
    timings: dict[str, Any] | None
    artifacts: list[dict[str, Any]]
    cost: dict[str, Any] | None
    models: RunModels | None = Field(default=None, description="the model gateway's view of the run (specs with a models: block)")
    duration_ms: int | None
    created_at: str
    started_at: str | None
    finished_at: str | None


RunStatus = Literal["queued", "running", "passed", "failed", "errored"]


class RunListQuery(PageQuery):
    status: str | None = Field(default=None, description="queued | running | passed | failed | errored")
    spec_id: str | None = None
    experiment_id: str | None = None
    scenario_id: str | None = None
    sandbox_id: str | None = None
    replay_of: str | None = None


class TrajectoryQuery(BaseModel):
    """Both come with the signed URL of a Run's trajectory_url; without them the answer is 403."""
    model_config = ConfigDict(extra="ignore")
    expires: str | None = Field(default=None, description="unix time", pattern=r"^[0-9]{1,12}$")
    sig: str | None = Field(default=None, description="HMAC signature", pattern=r"^[0-9a-f]{1,128}$")


class RunEvent(Response):
    """One run stream event (SSE `data:`): step, tool_call, invariant_result, error, done."""
    model_config = ConfigDict(extra="allow")
    type: str
