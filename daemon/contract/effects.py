"""A run's effect ledger (what it changed outside the agent's own process) and the differences
between two runs' ledgers (daemon/effects/)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from daemon.contract.common import Response

EffectKind = Literal["db", "http", "model", "file", "process"]


class DbEffect(Response):
    service: str
    table: str = Field(description="`schema.table` outside `public`")
    operation: str = Field(description="insert | update | delete | ddl")
    rows: int | None = Field(description="rows changed; None when unknown (TRUNCATE, DDL)")
    transactions: int = Field(description="committed transactions that did it")
    commands: list[str] = Field(default_factory=list, description="the DDL commands (operation ddl)")
    key_columns: list[str] = Field(default_factory=list, description=(
        "the table's primary-key columns (quoted where needed); empty for a table without one, TRUNCATE and DDL"))
    keys: list[str] = Field(default_factory=list, description=(
        "the primary-key values of the changed rows, distinct, in commit order, at most 20 (`3`; `(3, a)` for a key "
        "of several columns), each cut to 128 characters"))
    keys_more: bool = Field(default=False, description="more rows changed than `keys` lists")


class HttpEffect(Response):
    host: str
    method: str
    path: str = Field(description="the request path without its query string")
    calls: int
    statuses: dict[str, int] = Field(description="calls by response status (`blocked` when the proxy refused)")


class ModelEffect(Response):
    model: str
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(description="None when no call was priced")


class FileEffect(Response):
    path: str = Field(description="absolute")
    change: Literal["added", "modified", "deleted"]
    where: Literal["workspace", "container"] = Field(description="inside /workspace, or elsewhere in the agent's container")


class ProcessEffect(Response):
    command: str
    count: int
    exit_codes: list[int | None]


class EffectSources(Response):
    """Which evidence the ledger could read: an effect kind whose source is off is unknown, not none."""
    db: bool = Field(description="audit.db_writes")
    http: bool = Field(description="audit.http_calls")
    models: bool = Field(description="the trace's llm_call events (always read)")
    workspace_files: bool = Field(description="the workspace diff around the agent was recorded")
    container_files: bool = Field(description="the container diff around the agent was recorded")
    processes: bool = Field(description="audit.process_spawns")


class RunEffects(Response):
    run_id: str
    spec_id: str
    spec_version: int
    experiment_id: str | None
    scenario_id: str | None
    status: str
    window: Literal["agent", "run"] = Field(
        description="agent: the events while the agent ran (and its leftovers); run: the whole sandbox's (runs recorded "
                    "before the window was kept, including setup and checks)")
    sources: EffectSources
    db: list[DbEffect]
    http: list[HttpEffect]
    models: list[ModelEffect]
    files: list[FileEffect]
    processes: list[ProcessEffect]
    notes: list[str] = Field(default_factory=list)


class EffectDifference(Response):
    kind: EffectKind
    key: str = Field(description="what the effect is: `db orders insert`, `http POST api.example.test/v1/refunds`, "
                                 "`file /workspace/config.yaml`, `process CMD`, `model NAME`")
    a: Any = Field(description="A's quantity (rows, calls, the file change, runs, model calls); None when A had none")
    b: Any = Field(description="B's quantity; None when B had none")
    message: str = Field(description="one line, e.g. `A wrote 3 rows to orders (insert), B 0`")
    a_keys: str | None = Field(default=None, description="db: the keys of the rows A changed, e.g. `id=3,4`")
    b_keys: str | None = Field(default=None, description="db: the keys of the rows B changed")


class EffectsDiffQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    other: str = Field(min_length=1, max_length=128, description="the run B compared with this run (A)")


class EffectsDiff(Response):
    a: str = Field(description="run A's id")
    b: str = Field(description="run B's id")
    differences: list[EffectDifference]
    unknown: list[str] = Field(description="effect kinds one of the runs did not record, so not compared")


class ScenarioEffectDifference(Response):
    kind: EffectKind
    key: str
    side: Literal["between", "baseline", "candidate"] = Field(
        description="between: differs between the experiments; baseline/candidate: differs between that side's replicas")
    baseline: list[Any] = Field(description="the quantity in each baseline run (None: absent)")
    candidate: list[Any] = Field(description="the quantity in each candidate run (None: absent)")
    message: str


class ScenarioEffects(Response):
    matrix_entry: dict[str, Any]
    baseline_runs: list[str]
    candidate_runs: list[str]
    differences: list[ScenarioEffectDifference]
