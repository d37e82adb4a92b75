"""Behaviors: a detection (binary or classifier) with verdicts, a rolling rate over the last 50 and
a baseline whose crossing latches and notifies (SPEC "Alert latch")."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from daemon.contract.alerts import DESTINATION_RULES, Notify, Routing
from daemon.contract.common import Request, Response

MAX_VERDICTS_PER_REQUEST = 500
WINDOW = 50
MIN_SAMPLE = 20
ID = Field(default=None, min_length=1, max_length=200)
SINGLE_FIELDS = ("detected", "judge_error", "trace_id", "span_id", "label")
# A classifier names what produces its verdicts; routing names its destination.
CLASSIFIER_RULE = {"if": {"properties": {"kind": {"const": "classifier"}}, "required": ["kind"]},
                   "then": {"anyOf": [{"required": ["judge_id"], "properties": {"judge_id": {"type": "string"}}},
                                      {"required": ["rule_id"], "properties": {"rule_id": {"type": "string"}}}]}}


class BehaviorCreate(Routing):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"allOf": [*DESTINATION_RULES, CLASSIFIER_RULE]})

    notify: Notify | None = Field(default=None, description="where the breach and recovery notices go; none: the latch only")
    name: str = Field(min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    kind: Literal["binary", "classifier"]
    judge_id: str | None = Field(default=None, min_length=1, max_length=200, description="a stored judge: each span an llm_judge rule using it scores is a verdict")
    rule_id: str | None = Field(default=None, min_length=1, max_length=200, description="a score rule: each span it scores is a verdict")
    labels: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(default=None, max_length=50, description="a classifier's labels; verdict labels must be one of them")
    baseline_pct: float = Field(ge=0, le=1, description="detection-rate threshold, e.g. 0.2 for 20%")
    baseline_direction: Literal["above", "below", "either"] = Field(description=(
        "which side of the baseline is a breach; either: crossing it in either direction from the side the rate was first "
        "seen on (with the minimum sample)"))


class Behavior(Response):
    id: str
    name: str
    description: str | None
    kind: Literal["binary", "classifier"]
    judge_id: str | None
    rule_id: str | None
    labels: list[str] | None
    baseline_pct: float
    baseline_direction: Literal["above", "below", "either"]
    notify: Notify | None
    slack_channel: str | None
    webhook_url: str | None
    email_to: str | None
    breached: bool
    created_at: str
    secret: str | None = Field(default=None, description="webhook signing secret: only in the creation response")


class Verdict(Request):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"anyOf": [
        {"required": ["detected"], "properties": {"detected": {"type": "boolean"}}},
        {"required": ["judge_error"], "properties": {"judge_error": {"type": "string"}}}]})

    detected: bool | None = Field(default=None, description="null only with judge_error")
    judge_error: str | None = Field(default=None, min_length=1, max_length=500, description="the judge failed: not counted in the rate")
    trace_id: str | None = ID
    span_id: str | None = ID
    label: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _detected(self) -> "Verdict":
        if self.detected is None and self.judge_error is None:
            raise ValueError("detected is required (true or false) unless judge_error is given")
        return self


class VerdictsPost(Request):
    """One verdict, or `{verdicts: [...]}`."""
    # A field left null counts as not given.
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "anyOf": [{"required": ["verdicts"], "properties": {"verdicts": {"not": {"type": "null"}}, **{name: {"type": "null"} for name in SINGLE_FIELDS}}},
                  {"required": ["detected"], "properties": {"detected": {"type": "boolean"}, "verdicts": {"type": "null"}}},
                  {"required": ["judge_error"], "properties": {"judge_error": {"type": "string"}, "verdicts": {"type": "null"}}}]})

    detected: bool | None = None
    judge_error: str | None = Field(default=None, min_length=1, max_length=500)
    trace_id: str | None = ID
    span_id: str | None = ID
    label: str | None = Field(default=None, min_length=1, max_length=200)
    verdicts: list[Verdict] | None = Field(default=None, min_length=1, max_length=MAX_VERDICTS_PER_REQUEST)

    def items(self) -> list[Verdict]:
        if self.verdicts is not None:
            return self.verdicts
        return [Verdict(**{name: getattr(self, name) for name in SINGLE_FIELDS})]

    @model_validator(mode="after")
    def _one_form(self) -> "VerdictsPost":
        single = [name for name in SINGLE_FIELDS if getattr(self, name) is not None]
        if self.verdicts is not None and single:
            raise ValueError(f"give either verdicts or one verdict's fields, not both ({', '.join(single)})")
        if self.verdicts is None and self.detected is None and self.judge_error is None:
            raise ValueError("detected is required (true or false) unless judge_error or verdicts is given")
        return self


class BehaviorStats(Response):
    rate: float | None = Field(description=f"detections / counted verdicts over the last {WINDOW} (judge errors not counted)")
    sample: int
    breached: bool = Field(description=f"the latch: set when the rate crossed the baseline with at least {MIN_SAMPLE} verdicts")
    baseline_pct: float
    baseline_direction: Literal["above", "below", "either"]


class VerdictsAccepted(Response):
    accepted: int
    stats: BehaviorStats
