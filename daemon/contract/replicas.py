"""Replica suites: the create request, the suite record as GET /v1/replicas/{id} answers it, and its stream events."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from daemon.contract.common import JsonValue, Request, Response
from daemon.contract.specs import SPEC_ID_MAX, SPEC_ID_PATTERN


class ReplicaSuiteCreate(Request):
    """Run one spec `n_replicas` times, one seed per replica. Secrets are held in memory only."""

    spec_id: str = Field(min_length=1, max_length=SPEC_ID_MAX, pattern=SPEC_ID_PATTERN)
    n_replicas: int = Field(ge=2, le=1000, description="2..1000")
    inputs: dict[str, JsonValue] | None = None
    spec_version: int | None = Field(default=None, ge=1, description="default: latest")
    secrets: dict[str, str] | None = Field(default=None, description="name -> value; held in memory only, never stored or echoed")


class ReplicaReproducer(Response):
    model_config = ConfigDict(extra="allow")
    command: str


class SuiteReplica(Response):
    index: int
    seed: str
    run_id: str | None
    status: str | None = Field(description="pending|queued|running|passed|failed|errored|cancelled")
    score: float | None
    duration_ms: int | None
    error: str | None
    reproducer: dict[str, Any] | None


class ReplicaSuite(Response):
    """Pass/fail counts are over finished replicas; `verdict` is set once the suite is done."""
    id: str
    run_id: str | None
    spec_id: str
    spec_version: int
    n_replicas: int
    status: Literal["running", "complete", "errored"]
    completed: int
    passed: int
    failed: int
    errored: int
    failure_rate: float | None
    pass_rate: float | None
    pass_rate_ci: list[float] | None = Field(description="95% Wilson interval")
    verdict: Literal["pass", "fail", "flaky", "error"] | None
    strategy: str
    strategy_passed: bool | None
    seeds: list[str]
    inputs: dict[str, Any]
    replicas: list[SuiteReplica]
    error: str | None
    created_at: str
    finished_at: str | None


class ReplicaEvent(Response):
    """{type: replica, index, seed, run_id, status, score, duration_ms} or {type: done, suite}."""
    model_config = ConfigDict(extra="allow")
    type: Literal["replica", "done"]
