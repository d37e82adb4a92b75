"""Score rules, offline scoring jobs and score rows (SPEC "Scoring", DECISIONS G5)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictFloat

from daemon.contract.common import ID_PATTERN, PageQuery, Query, Request, Response
from daemon.contract.specs import SPEC_ID_MAX, SPEC_ID_PATTERN

RULE_TYPES = ("llm_judge", "regex", "python")
EVENT_TYPES = ("llm_call", "tool_use", "tool_call")
MAX_RUBRIC_CHARS = 20_000
MAX_PATTERN_CHARS = 2_000
MAX_COMMAND_CHARS = 4_000
MAX_RULES_PER_JOB = 100
MAX_SCORES_IN_SUMMARY = 1_000
RuleId = Annotated[str, Field(pattern=ID_PATTERN)]


class AppliesTo(Request):
    """Which spans a rule scores; every span when empty."""
    event_type: Literal["llm_call", "tool_use", "tool_call"] | None = None
    tool: str | None = Field(default=None, min_length=1, max_length=200)


# What each type takes (daemon/scores/rules.py checks the same): its required field, and no field of
# another type (a field left null counts as not given).
RULE_FIELDS = {"llm_judge": ("rubric", {"rubric", "judge_id", "model"}), "regex": ("pattern", {"pattern"}),
               "python": ("command", {"command"})}
TYPED_RULE_FIELDS = ("rubric", "pattern", "command", "judge_id", "model")


def _rule_type_schema(kind: str) -> dict[str, Any]:
    needed, allowed = RULE_FIELDS[kind]
    then: dict[str, Any] = {"properties": {name: {"type": "null"} for name in TYPED_RULE_FIELDS if name not in allowed}}
    present = [{"required": [field], "properties": {field: {"type": "string"}}}
               for field in ((needed, "judge_id") if kind == "llm_judge" else (needed,))]
    then["anyOf"] = present
    return {"if": {"properties": {"type": {"const": kind}}, "required": ["type"]}, "then": then}


class ScoreRuleCreate(Request):
    """`rubric` (or `judge_id`) for llm_judge, `pattern` for regex, `command` for python; a field
    of another type is refused. A regex rule scores 1 when `pattern` is found in the span's output
    (its input when it has no output), else 0."""
    model_config = ConfigDict(extra="forbid", json_schema_extra={"allOf": [_rule_type_schema(kind) for kind in RULE_FIELDS]})
    name: str = Field(min_length=1, max_length=200)
    eval_id: str | None = Field(default=None, max_length=SPEC_ID_MAX, pattern=SPEC_ID_PATTERN, description="the spec id whose experiments it scores automatically")
    type: Literal["llm_judge", "regex", "python"]
    rubric: str | None = Field(default=None, min_length=1, max_length=MAX_RUBRIC_CHARS)
    pattern: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN_CHARS)
    command: str | None = Field(default=None, min_length=1, max_length=MAX_COMMAND_CHARS)
    judge_id: str | None = Field(default=None, pattern=ID_PATTERN, description="a stored judge (llm_judge)")
    model: str | None = Field(default=None, min_length=1, max_length=200)
    # strict: a JSON boolean is not a number (lax pydantic would take false as 0.0)
    threshold: StrictFloat | None = Field(default=None, ge=0.0, le=1.0, description="passed when score >= threshold (default 0.5)")
    applies_to: AppliesTo = Field(default_factory=AppliesTo)


class ScoreRule(Response):
    id: str
    name: str
    eval_id: str | None
    type: Literal["llm_judge", "regex", "python"]
    rubric: str | None
    pattern: str | None
    command: str | None
    judge_id: str | None
    model: str | None
    threshold: float | None
    applies_to: AppliesTo
    source: Literal["api", "spec"] = Field(description="spec: declared in the spec's score_rules (replaced on each upload)")
    created_at: str
    updated_at: str


class ScoreRuleListQuery(PageQuery):
    eval_id: str | None = Field(default=None, max_length=SPEC_ID_MAX, pattern=SPEC_ID_PATTERN)


class ScoreRequest(Request):
    rule_ids: list[RuleId] | None = Field(default=None, min_length=1, max_length=MAX_RULES_PER_JOB,
                                       description="default: every rule of the tenant whose eval_id is the experiment's spec or unset")


class ScoreJobAccepted(Response):
    job_id: str
    status: Literal["queued", "running", "completed", "failed"]


class ScoreJob(Response):
    id: str
    experiment_id: str
    rule_ids: list[str]
    trigger: Literal["api", "completion"]
    status: Literal["queued", "running", "completed", "failed"]
    total: int | None = Field(description="spans x rules to score; null until the job starts")
    done: int
    errors: int = Field(description="rows with a judge_error (rule_error for python rules)")
    error: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None


class ScoreJobEvent(Response):
    type: Literal["progress", "done"]
    job: ScoreJob


class JudgeError(Response):
    code: str
    message: str


class Score(Response):
    id: str
    experiment_id: str
    scenario_id: str | None
    trace_id: str
    span_id: str
    rule_id: str
    score: float | None = Field(description="null when the judge (or python rule) failed: never 0 for a failure")
    passed: bool | None
    reason: str | None
    judge_error: JudgeError | None
    created_at: str


class ScoreListQuery(PageQuery):
    experiment_id: str = Field(pattern=ID_PATTERN)
    rule_id: str | None = Field(default=None, pattern=ID_PATTERN)
    all: bool = Field(default=False, description="every row; default the latest per span and rule")


class ExperimentScoresQuery(Query):
    all: bool = Field(default=False, description="every row; default the latest per span and rule")


class RuleAggregate(Response):
    rule_id: str
    name: str | None = Field(description="null when the rule was deleted")
    type: Literal["llm_judge", "regex", "python"] | None
    n: int
    passed: int
    pass_rate: float | None = Field(description="passed / scored")
    mean_score: float | None
    scored: int
    unscored: int
    judge_error_rate: float | None = Field(description="rows with a judge_error / n")


class ExperimentScores(Response):
    experiment_id: str
    scored: int
    unscored: int
    judge_error_rate: float | None
    rules: list[RuleAggregate]
    items: list[Score] = Field(description=f"the first {MAX_SCORES_IN_SUMMARY} rows; GET /v1/scores pages through all")
    truncated: bool
