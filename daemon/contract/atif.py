"""ATIF, the Agent Trajectory Interchange Format (Harbor's RFC 0001, `ATIF-v1.0` to `ATIF-v1.8`): the
document svc writes for a run (`GET /v1/runs/{run_id}/atif`) and reads into a trace
(`POST /v1/trajectories`).

These models (named `Atif...` in the API document) are svc's own reading of the RFC's schema (the `atif` package on PyPI has the same
shapes; the tests validate svc's exports with it). They are strict, because an imported file is
untrusted input: every object refuses unknown keys, every scalar must have its JSON type (no "3" for
3, no true for 1), lists are capped, and a problem is reported with the path of the field
(`steps.3.tool_calls.0.arguments`). Strings are data: an image or audio `path`, a subagent's
`trajectory_path` and `continued_trajectory_ref` are kept as text and never opened or fetched.
docs/how-to/atif.md is the mapping to and from svc's trace events.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from daemon.contract.common import ID_PATTERN, Query, Response

SCHEMA_VERSION = "ATIF-v1.8"
VERSION_PATTERN = r"^ATIF-v1\.[0-9]{1,2}$"
MAX_STEPS = 5000
MAX_TOOL_CALLS = 128  # per step
MAX_RESULTS = 128  # observation results per step
MAX_PARTS = 64  # content parts per message
MAX_SUBAGENTS = 64  # embedded subagent trajectories per trajectory
MAX_SUBAGENT_DEPTH = 3
MAX_TOKEN_IDS = 1_000_000
MAX_COUNT = 10**15
NAME_LENGTH = 512
PATH_LENGTH = 4096

ImageMediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
AudioMediaType = Literal["audio/wav", "audio/mpeg", "audio/mp4", "audio/aac", "audio/ogg", "audio/flac", "audio/webm", "audio/aiff"]
Count = int


class _Atif(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class AtifImageSource(_Atif):
    """An image next to the trajectory (v1.6+). The path is text: svc never opens it."""
    media_type: ImageMediaType
    path: str = Field(max_length=PATH_LENGTH)


class AtifAudioSource(_Atif):
    """An audio file next to the trajectory (v1.8+). The path is text: svc never opens it."""
    media_type: AudioMediaType
    path: str = Field(max_length=PATH_LENGTH)
    duration_sec: float | None = Field(default=None, ge=0)


class AtifContentPart(_Atif):
    """One part of a multimodal message or observation (v1.6+): `text`, or a `source`."""
    type: Literal["text", "image", "audio"]
    text: str | None = None
    source: AtifImageSource | AtifAudioSource | None = None

    @model_validator(mode="after")
    def _payload(self) -> AtifContentPart:
        if self.type == "text":
            if self.text is None or self.source is not None:
                raise ValueError("a text part has `text` and no `source`")
        elif self.source is None or self.text is not None:
            raise ValueError(f"an {self.type} part has a `source` and no `text`")
        elif not isinstance(self.source, AtifImageSource if self.type == "image" else AtifAudioSource):
            raise ValueError(f"an {self.type} part needs an {self.type} media_type")
        return self


Content = str | list[AtifContentPart]


class AtifMetrics(_Atif):
    """One step's LLM figures; `prompt_tokens` counts cached prompt tokens too."""
    prompt_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    completion_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    cached_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    cost_usd: float | None = Field(default=None, ge=0)
    prompt_token_ids: list[int] | None = Field(default=None, max_length=MAX_TOKEN_IDS)
    completion_token_ids: list[int] | None = Field(default=None, max_length=MAX_TOKEN_IDS)
    logprobs: list[float] | None = Field(default=None, max_length=MAX_TOKEN_IDS)
    extra: dict[str, Any] | None = None


class AtifToolCall(_Atif):
    tool_call_id: str = Field(max_length=NAME_LENGTH)
    function_name: str = Field(max_length=NAME_LENGTH)
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class AtifSubagentTrajectoryRef(_Atif):
    """A delegated subagent's trajectory: embedded (`trajectory_id`) or elsewhere (`trajectory_path`,
    kept as text, never followed)."""
    trajectory_id: str | None = Field(default=None, max_length=NAME_LENGTH)
    trajectory_path: str | None = Field(default=None, max_length=PATH_LENGTH)
    session_id: str | None = Field(default=None, max_length=NAME_LENGTH)
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _resolvable(self) -> AtifSubagentTrajectoryRef:
        if self.trajectory_id is None and self.trajectory_path is None:
            raise ValueError("a subagent reference sets trajectory_id or trajectory_path")
        return self


class AtifObservationResult(_Atif):
    source_call_id: str | None = Field(default=None, max_length=NAME_LENGTH)
    content: Content | None = Field(default=None)
    subagent_trajectory_ref: list[AtifSubagentTrajectoryRef] | None = Field(default=None, max_length=MAX_SUBAGENTS)
    extra: dict[str, Any] | None = None

    @field_validator("content")
    @classmethod
    def _parts(cls, value: Content | None) -> Content | None:
        if isinstance(value, list) and len(value) > MAX_PARTS:
            raise ValueError(f"at most {MAX_PARTS} content parts")
        return value


class AtifObservation(_Atif):
    results: list[AtifObservationResult] = Field(max_length=MAX_RESULTS)


AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class AtifStep(_Atif):
    """One turn: a system prompt, a user message, or an agent turn (inference, actions, observations)."""
    step_id: int = Field(ge=1, le=MAX_COUNT)
    timestamp: str | None = Field(default=None, max_length=64, description="ISO 8601")
    source: Literal["system", "user", "agent"]
    model_name: str | None = Field(default=None, max_length=NAME_LENGTH)
    reasoning_effort: str | float | None = Field(default=None)
    message: Content
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = Field(default=None, max_length=MAX_TOOL_CALLS)
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    extra: dict[str, Any] | None = None
    llm_call_count: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    is_copied_context: bool | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise ValueError("not an ISO 8601 timestamp") from None
        return value

    @field_validator("message")
    @classmethod
    def _parts(cls, value: Content) -> Content:
        if isinstance(value, list) and len(value) > MAX_PARTS:
            raise ValueError(f"at most {MAX_PARTS} content parts")
        return value

    @model_validator(mode="after")
    def _source_rules(self) -> AtifStep:
        if self.source != "agent":
            for name in AGENT_ONLY:
                if getattr(self, name) is not None:
                    raise ValueError(f"`{name}` is only valid on agent steps (this step's source is {self.source})")
        if self.source == "agent" and self.llm_call_count == 0 and (self.metrics is not None or self.reasoning_content is not None):
            raise ValueError("an agent step with llm_call_count 0 has no metrics and no reasoning_content")
        if self.observation is not None and self.tool_calls is not None:
            ids = {call.tool_call_id for call in self.tool_calls}
            for result in self.observation.results:
                if result.source_call_id is not None and result.source_call_id not in ids:
                    raise ValueError(f"observation source_call_id {result.source_call_id[:100]!r} matches no tool call of this step")
        return self


class AtifAgent(_Atif):
    name: str = Field(min_length=1, max_length=NAME_LENGTH)
    version: str = Field(max_length=NAME_LENGTH)
    model_name: str | None = Field(default=None, max_length=NAME_LENGTH)
    tool_definitions: list[dict[str, Any]] | None = Field(default=None, max_length=1024)
    extra: dict[str, Any] | None = None


class AtifFinalMetrics(_Atif):
    total_prompt_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    total_completion_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    total_cached_tokens: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    total_cost_usd: float | None = Field(default=None, ge=0)
    total_steps: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    extra: dict[str, Any] | None = None


class AtifTrajectory(_Atif):
    """An ATIF document. svc writes `ATIF-v1.8`; it reads `ATIF-v1.0` to `ATIF-v1.8` (later fields
    are optional, so an earlier document is valid here). svc's own results of a run are under
    `extra.svc` (see docs/how-to/atif.md)."""
    schema_version: str = Field(pattern=VERSION_PATTERN, description="ATIF-v1.0 ... ATIF-v1.8")
    session_id: str | None = Field(default=None, max_length=NAME_LENGTH)
    trajectory_id: str | None = Field(default=None, max_length=NAME_LENGTH)
    agent: AtifAgent
    steps: list[AtifStep] = Field(max_length=MAX_STEPS)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    continued_trajectory_ref: str | None = Field(default=None, max_length=PATH_LENGTH)
    extra: dict[str, Any] | None = None
    # Each item is an AtifTrajectory (validated as one below); declared as objects so the OpenAPI document
    # has no recursive schema.
    subagent_trajectories: list[Any] | None = Field(default=None, max_length=MAX_SUBAGENTS,
                                                    description="embedded subagent trajectories, each an ATIF trajectory")

    @field_validator("subagent_trajectories")
    @classmethod
    def _subagents(cls, value: list[Any] | None) -> list[Any] | None:
        if value is None:
            return None
        out = []
        for index, item in enumerate(value):
            if isinstance(item, AtifTrajectory):
                out.append(item)
                continue
            if not isinstance(item, dict):
                raise ValueError(f"{index}: a subagent trajectory is a JSON object")
            try:
                out.append(AtifTrajectory.model_validate(item))
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                where = ".".join(str(part) for part in err["loc"])
                raise ValueError(f"{index}{'.' + where if where else ''}: {err['msg']}") from None
        return out

    def subagents(self) -> list[AtifTrajectory]:
        return list(self.subagent_trajectories or [])

    @model_validator(mode="after")
    def _order(self) -> AtifTrajectory:
        for index, step in enumerate(self.steps):
            if step.step_id != index + 1:
                raise ValueError(f"steps.{index}.step_id is {step.step_id}; step ids are 1, 2, 3, ... in order")
        seen: set[str] = set()
        for index, sub in enumerate(self.subagents()):
            if sub.trajectory_id is None:
                raise ValueError(f"subagent_trajectories.{index} needs a trajectory_id")
            if sub.trajectory_id in seen:
                raise ValueError(f"subagent_trajectories.{index}.trajectory_id {sub.trajectory_id[:100]!r} is not unique")
            seen.add(sub.trajectory_id)
        return self



class TrajectoryImportQuery(Query):
    """Where the imported trace is filed: a run (its experiment and scenario come with it), or an
    experiment (and scenario). Neither: a trace of its own, found by its trace id."""
    run_id: str | None = Field(default=None, pattern=ID_PATTERN)
    experiment_id: str | None = Field(default=None, pattern=ID_PATTERN)
    scenario_id: str | None = Field(default=None, pattern=ID_PATTERN)


class TrajectoryImported(Response):
    trace_id: str
    steps: int = Field(description="steps read, the embedded subagents' included")
    events: int = Field(description="trace events written")
    run_id: str | None = None
    experiment_id: str | None = None
    scenario_id: str | None = None
    agent: str
