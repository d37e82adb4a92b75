"""LLM judges: definitions, a verdict, calibration against labelled examples."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from daemon.contract.common import JsonValue, Query, Request, Response

# Why a judge call produced no score. The first six are the documented vocabulary; `not_configured`
# (no SERVICE_JUDGE_BASE_URL) and `rejected` (the endpoint refused the request with a 4xx other than
# 429, e.g. a wrong key or model) are the daemon's own.
JUDGE_ERROR_CODES = ("rate_limited", "timeout", "network", "server_error", "unparsable", "refusal", "not_configured", "rejected")
JudgeErrorCode = Literal["rate_limited", "timeout", "network", "server_error", "unparsable", "refusal", "not_configured", "rejected"]

MAX_RUBRIC = 20_000
MAX_CHOICES = 50
MAX_VALUE_CHARS = 100_000  # input, output, expected: each at most this long as JSON text
MAX_CALIBRATION_EXAMPLES = 1000
MAX_JUDGES_PER_TENANT = 500

Label = Annotated[str, StringConstraints(min_length=1, max_length=100)]
Unit = Annotated[float, Field(ge=0, le=1, strict=True)]


class JudgeError(Response):
    code: JudgeErrorCode
    message: str


class JudgeCreate(Request):
    model_config = Request.model_config | {"json_schema_extra": {
        # a classifier needs its choices; a score judge has none
        "if": {"properties": {"kind": {"const": "classifier"}}, "required": ["kind"]},
        "then": {"required": ["choices"], "properties": {"choices": {"type": "object"}}},
        "else": {"properties": {"choices": {"type": "null"}}},
    }}

    name: str = Field(min_length=1, max_length=200)
    rubric: str = Field(min_length=1, max_length=MAX_RUBRIC, description="what the judge grades against")
    model: str | None = Field(default=None, min_length=1, max_length=200, description="default: SERVICE_JUDGE_MODEL")
    threshold: Unit = Field(default=0.5, description="a score at or above it passes")
    kind: Literal["score", "classifier"] = "score"
    choices: dict[Label, Unit] | None = Field(
        default=None, min_length=2, max_length=MAX_CHOICES,
        description="{label: score}: the labels a classifier picks from and the score each is worth (classifier only)")

    @model_validator(mode="after")
    def _choices_match_kind(self) -> "JudgeCreate":
        if self.kind == "classifier" and self.choices is None:
            raise ValueError("choices: required for a classifier ({label: score})")
        if self.kind == "score" and self.choices is not None:
            raise ValueError("choices: only a classifier has choices")
        return self


class Confusion(Response):
    tp: int
    fp: int
    tn: int
    fn: int


class Calibration(Response):
    n: int = Field(description="examples the judge scored (judge errors excluded)")
    agreement: float | None
    cohen_kappa: float | None = Field(description="null when undefined (every label or every verdict the same)")
    f1: float | None
    tpr: float | None
    tnr: float | None
    confusion: Confusion
    warnings: list[str]
    unscored: int = Field(description="examples whose judge call failed (not counted in the metrics)")
    judge_errors: dict[str, int] = Field(description="unscored examples by judge error code")
    calibrated_at: str


class Judge(Response):
    id: str
    name: str
    rubric: str
    model: str | None
    threshold: float
    kind: Literal["score", "classifier"]
    choices: dict[str, float] | None
    calibration: Calibration | None = Field(description="the last calibration, if any")
    created_at: str


class JudgeEvalRequest(Request):
    input: JsonValue = Field(description=f"what the judged system was given (any JSON; at most {MAX_VALUE_CHARS} characters as JSON)")
    output: JsonValue = Field(description=f"what it answered (any JSON; at most {MAX_VALUE_CHARS} characters as JSON)")
    expected: JsonValue = Field(default=None, description=f"a reference answer (any JSON; at most {MAX_VALUE_CHARS} characters as JSON)")


class JudgeEvalQuery(Query):
    cache: bool = Field(default=True, description="false: ask the judge even when an identical call is cached")


class JudgeVerdict(Response):
    score: float | None = Field(description="null when the judge call failed (see judge_error), never 0")
    passed: bool | None
    reason: str
    label: str | None = Field(description="the classifier's label")
    judge_error: JudgeError | None = Field(description="why the judge call produced no score")


class CalibrationExample(Request):
    input: JsonValue
    output: JsonValue
    expected: JsonValue = None
    label: bool = Field(strict=True, description="true: the output should pass")


class CalibrateRequest(Request):
    examples: list[CalibrationExample] = Field(min_length=1, max_length=MAX_CALIBRATION_EXAMPLES)
