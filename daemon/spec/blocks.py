"""The smaller top-level blocks of a spec: task, agent, secrets, setup, network, audit, forbidden,
scoring, parallelism, determinism, resources, teardown, score_rules and alerts."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from .durations import parse_duration
from .types import (
    Argv,
    ByteSize,
    Duration,
    EnvMap,
    ImageRef,
    NonEmptyStr,
    Port,
    Seed,
    ServiceName,
    SpecModel,
    is_valid_env_name,
)

__all__ = [
    "Task",
    "SnapshotAgent",
    "CliAgent",
    "ImageAgent",
    "InstalledAgent",
    "INSTALLED_AGENT_PROVIDERS",
    "Agent",
    "AGENT_TYPES",
    "SecretSource",
    "parse_secret_source",
    "Setup",
    "Egress",
    "IngressRule",
    "Ingress",
    "Network",
    "FileSystemAudit",
    "Audit",
    "Forbidden",
    "ReplicaAggregation",
    "Scoring",
    "Parallelism",
    "Clock",
    "Determinism",
    "Resources",
    "AuditLogExport",
    "DbDumpExport",
    "SnapshotExport",
    "Export",
    "Teardown",
    "AppliesTo",
    "LlmJudgeRule",
    "RegexRule",
    "PythonRule",
    "ScoreRule",
    "ALERT_METRICS",
    "ALERT_OPERATORS",
    "parse_alert_condition",
    "Alert",
]

DEFAULT_AGENT_TIMEOUT = 300.0


# --- task and agent ------------------------------------------------------------------------------


class Task(SpecModel):
    """What the agent is asked to do. ``{{ name }}`` in ``prompt`` is replaced from ``inputs``."""

    prompt: NonEmptyStr
    inputs: dict[str, Any] = Field(default_factory=dict)


class _AgentBase(SpecModel):
    timeout: Duration = DEFAULT_AGENT_TIMEOUT
    env: EnvMap = Field(default_factory=dict)
    # False: every process the agent leaves behind is stopped when it ends, before anything is
    # measured. True (a task whose checks need a server the agent started): they run on, are
    # audited until the checks end, and a dataset's `expected` is not written where they could read it.
    keep_running: bool = False


class SnapshotAgent(_AgentBase):
    """An uploaded agent snapshot: ``snapshot`` (a name; resolves to its latest version) or
    ``snapshot_id`` (pins one version); ``entrypoint`` overrides the snapshot's own."""

    type: Literal["snapshot"]
    snapshot: NonEmptyStr | None = None
    snapshot_id: NonEmptyStr | None = None
    entrypoint: Argv | None = None
    # Read by the CLI only (client/agent_source.py): the daemon never sees the directory.
    source: NonEmptyStr | None = Field(
        default=None, examples=["./my-agent"],
        description="the agent's local source directory, relative to the spec file: the CLI uploads it as"
                    " `snapshot` when its content changed, and watch mode re-runs on changes under it")

    @model_validator(mode="after")
    def _one_reference(self) -> SnapshotAgent:
        if (self.snapshot is None) == (self.snapshot_id is None):
            raise ValueError("a snapshot agent needs exactly one of snapshot (a name) or snapshot_id")
        if self.source is not None and self.snapshot is None:
            raise ValueError("source: uploads the directory under a name: it goes with snapshot (a name), not snapshot_id")
        return self


class CliAgent(_AgentBase):
    """A program run in /workspace inside the base image: ``binary`` followed by ``args``."""

    type: Literal["cli"]
    binary: NonEmptyStr
    args: list[str] = Field(default_factory=list)


class ImageAgent(_AgentBase):
    """An agent shipped as its own (fully-qualified) image; ``command`` overrides its default."""

    type: Literal["image"]
    image: ImageRef
    command: Argv | None = None


class InstalledAgent(_AgentBase):
    """An off-the-shelf coding agent installed from its registry into a layer on top of ``base``
    (daemon/agents/installed/), run headless in /workspace on the task prompt. Its model traffic goes
    through the model gateway, so the spec needs a ``models:`` block with the provider it speaks."""

    type: Literal["installed"]
    name: Literal["claude-code", "codex", "mini-swe-agent"]
    version: Annotated[str, Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$", examples=["2.1.332"],
                                  description="the exact package version (npm or PyPI), pinned")]
    model: NonEmptyStr = Field(examples=["claude-sonnet-4-5"])
    max_turns: int = Field(default=30, ge=1, le=10000,
                           description="the agent's turn limit (Codex CLI has none: only `timeout` bounds it)")


# The models: provider each installed agent's API is (models.cross_field_issues checks the spec has it).
INSTALLED_AGENT_PROVIDERS: dict[str, str] = {"claude-code": "anthropic", "codex": "openai", "mini-swe-agent": "openai"}

Agent = Annotated[SnapshotAgent | CliAgent | ImageAgent | InstalledAgent, Field(discriminator="type")]
AGENT_TYPES: tuple[str, ...] = ("snapshot", "cli", "image", "installed")


# --- secrets and setup ---------------------------------------------------------------------------

_SECRET_SOURCE_HINT = "expected env, env:<NAME>, file:<path>, command:<cmd> or dashboard"


def parse_secret_source(source: str, name: str | None = None) -> tuple[str, str | None]:
    """Split a secret source into ``(kind, argument)``: ``"env:OTHER" -> ("env", "OTHER")``,
    ``"dashboard" -> ("dashboard", None)``. Raises ``ValueError`` for anything else; ``name``
    (the secret's name) goes into the message."""
    what = f"secret '{name}'" if name else "secret"
    text = source.strip()
    if text in ("env", "dashboard"):
        return text, None
    kind, sep, arg = text.partition(":")
    if not sep or kind not in ("env", "file", "command"):
        raise ValueError(f"{what} has an unknown source '{source}' ({_SECRET_SOURCE_HINT})")
    arg = arg.strip()
    if not arg:
        raise ValueError(f"{what} has an incomplete source '{source}': nothing after '{kind}:'")
    if kind == "env" and not is_valid_env_name(arg):
        raise ValueError(f"{what} has source '{source}', but '{arg}' is not a valid environment variable name")
    return kind, arg


def _secret_source(value: str) -> str:
    parse_secret_source(value)
    return value.strip()


SecretSource = Annotated[str, AfterValidator(_secret_source)]


class Setup(SpecModel):
    """Commands run (``sh -c``, in /workspace) after fixtures and before the agent."""

    commands: list[NonEmptyStr] = Field(default_factory=list)


# --- network and audit ---------------------------------------------------------------------------

_HOST_GLOB_RE = re.compile(r"(\*\.)?([A-Za-z0-9*]([A-Za-z0-9*-]*[A-Za-z0-9*])?)(\.[A-Za-z0-9*]([A-Za-z0-9*-]*[A-Za-z0-9*])?)*")


def _host_glob(value: str) -> str:
    host = value.strip().lower()
    if "://" in host or "/" in host:
        raise ValueError(f"expected a hostname or glob like '*.example.com', not a URL: '{value}'")
    if host != "*" and not _HOST_GLOB_RE.fullmatch(host):
        raise ValueError(f"invalid hostname or glob '{value}' (e.g. 'api.example.com', '*.example.com')")
    return host


HostGlob = Annotated[str, AfterValidator(_host_glob)]


class Egress(SpecModel):
    """Outbound traffic. ``default: deny`` with ``allow`` hostnames/globs; an empty list allows
    nothing. Sandbox services are always reachable."""

    default: Literal["deny", "allow"] = "deny"
    allow: list[HostGlob] = Field(default_factory=list)


class IngressRule(SpecModel):
    from_: Literal["host"] = Field(default="host", alias="from")
    to_port: Port


class Ingress(SpecModel):
    """Inbound traffic: nothing reaches the sandbox unless allowed from the host to a port."""

    default: Literal["deny"] = "deny"
    allow: list[IngressRule] = Field(default_factory=list)


class Network(SpecModel):
    egress: Egress = Field(default_factory=Egress)
    ingress: Ingress = Field(default_factory=Ingress)
    dns_overrides: dict[str, ServiceName] = Field(default_factory=dict)
    """Real hostname -> the name of a sandbox service that answers for it."""


class FileSystemAudit(SpecModel):
    watch: list[NonEmptyStr] = Field(default_factory=lambda: ["/workspace"])
    track: list[Literal["writes", "reads", "deletes"]] = Field(default_factory=lambda: ["writes"])

    @field_validator("track")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        dupes = sorted({t for t in value if value.count(t) > 1})
        if dupes:
            raise ValueError(f"'{dupes[0]}' is listed twice")
        return value


class Audit(SpecModel):
    """Capture switches; all off by default."""

    db_writes: bool = False
    http_calls: bool = False
    process_spawns: bool = False
    stdout_capture: bool = False
    file_system: FileSystemAudit | None = None


# --- forbidden, scoring, parallelism -------------------------------------------------------------


EFFECT_BOUND = re.compile(r"^\s*(<=|>=|==|!=|<|>)?\s*(\d{1,9})\s*$")


def _effect_bound(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("a bound is a count (at most that many) or a string like '<= 1', '== 0', '>= 1'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a count cannot be negative")
        return f"<= {value}"
    match = EFFECT_BOUND.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a bound: write a count or '<op> N' with op one of <, <=, ==, !=, >, >=")
    return f"{match.group(1) or '<='} {int(match.group(2))}"


EffectBound = Annotated[str, BeforeValidator(_effect_bound),
                        WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0},
                                                  {"type": "string", "pattern": EFFECT_BOUND.pattern}]})]
DbOperation = Literal["insert", "update", "delete", "ddl"]


class EffectRules(SpecModel):
    """``forbidden.effects``: bounds over the run's effect ledger (daemon/effects). ``db: {TABLE:
    {insert|update|delete|ddl: BOUND}}`` bounds the rows the agent wrote (DDL: its statements);
    ``http: {HOST: {METHOD: BOUND}}`` the calls it made through the egress proxy (``*`` for any
    method). A BOUND is a count N (at most N) or ``"<op> N"``."""

    db: dict[NonEmptyStr, dict[DbOperation, EffectBound]] | None = None
    http: dict[NonEmptyStr, dict[NonEmptyStr, EffectBound]] | None = None


class Forbidden(SpecModel):
    """Trajectory rules; any violation fails the scenario. An absent rule is not checked; an empty
    list forbids everything (``http_except: []`` means no HTTP at all)."""

    db_writes_outside: list[NonEmptyStr] | None = None
    http_except: list[ServiceName] | None = None
    secrets_in_logs: Literal["deny"] | None = None
    file_writes_outside: list[NonEmptyStr] | None = None
    effects: EffectRules | None = None

    def sees_db_writes(self) -> bool:
        return self.db_writes_outside is not None or bool(self.effects and self.effects.db is not None)

    def sees_http_calls(self) -> bool:
        return self.http_except is not None or bool(self.effects and self.effects.http is not None)


class ReplicaAggregation(SpecModel):
    strategy: Literal["majority", "all_must_pass", "percentage"] = "majority"
    min_pass_rate: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _rate_for_percentage(self) -> ReplicaAggregation:
        if self.strategy == "percentage" and self.min_pass_rate is None:
            raise ValueError("strategy 'percentage' needs min_pass_rate (0..1)")
        if self.strategy != "percentage" and self.min_pass_rate is not None:
            raise ValueError(f"min_pass_rate only applies to strategy 'percentage', not '{self.strategy}'")
        return self


class Retries(SpecModel):
    """How often an experiment replica that errored for the infrastructure's sake (an engine error,
    a sandbox that could not boot for a cause outside the spec, a lost node) runs again, with a new
    sandbox and the same seed. Agent timeouts, spec errors and failed checks never run again."""

    infrastructure: int = Field(default=2, ge=0, le=10)


class Scoring(SpecModel):
    pass_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    replica_aggregation: ReplicaAggregation = Field(default_factory=ReplicaAggregation)
    retries: Retries = Field(default_factory=Retries)


def _matrix_entry(value: dict[str, Any]) -> dict[str, Any]:
    if not value:
        raise ValueError("a matrix entry must set at least one parameter")
    for key in value:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"invalid matrix parameter name '{key}': use letters, digits and '_'")
    return value


class DatasetRef(SpecModel):
    """``parallelism.dataset``: one scenario per record of that dataset version (crossed with ``matrix``)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+=~-]{0,199}$")
    version: int | None = Field(default=None, ge=1, description="default: the latest when the experiment is created")
    tags: list[NonEmptyStr] | None = Field(default=None, description="only records with any of these tags")


class Parallelism(SpecModel):
    replicas: int = Field(default=1, ge=1, le=1000)
    matrix: list[Annotated[dict[str, Any], AfterValidator(_matrix_entry)]] = Field(default_factory=list)
    dataset: DatasetRef | None = None


# --- determinism and resources -------------------------------------------------------------------


def _parse_instant(value: object) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"invalid clock time '{value}': expected ISO 8601 like '2024-01-01T00:00:00Z'"
            ) from None
    else:
        raise ValueError(f"invalid clock time {value!r}: expected ISO 8601 like '2024-01-01T00:00:00Z'")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment


class Clock(SpecModel):
    """``frozen`` stops the clock at ``at``; ``ticking`` starts it there and lets it run."""

    at: Annotated[datetime, BeforeValidator(_parse_instant)]
    mode: Literal["frozen", "ticking"] = "frozen"


def _clock_shorthand(value: object) -> object:
    if isinstance(value, (str, datetime, date)):
        return {"at": value, "mode": "frozen"}
    return value


ClockField = Annotated[
    Clock,
    BeforeValidator(_clock_shorthand),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time"},
                {
                    "type": "object",
                    "properties": {
                        "at": {"type": "string", "format": "date-time"},
                        "mode": {"enum": ["frozen", "ticking"], "default": "frozen"},
                    },
                    "required": ["at"],
                    "additionalProperties": False,
                },
            ],
            "description": "An ISO 8601 time (frozen there) or {at, mode: frozen | ticking}.",
        }
    ),
]


class Determinism(SpecModel):
    clock: ClockField | None = None
    seed: Seed | None = None
    dns: Literal["static"] | None = None


class Resources(SpecModel):
    """Sandbox limits. ``timeout`` covers setup, agent and scoring."""

    timeout: Duration | None = None
    concurrency_limit: Annotated[int, Field(ge=1)] | Literal["auto"] | None = Field(default=None, description=(
        "runs of this spec at once; auto (the default) leaves it to the daemon, which starts from the host's "
        "cores and memory and follows how fast sandboxes boot"))
    cpus: float | None = Field(default=None, gt=0)
    memory: ByteSize | None = None
    pids: int | None = Field(default=None, ge=1)
    disk: ByteSize | None = None

    @property
    def fixed_concurrency(self) -> int | None:
        """The spec's own cap on its runs at once; None when it leaves it to the daemon (auto)."""
        return self.concurrency_limit if isinstance(self.concurrency_limit, int) else None


# --- teardown ------------------------------------------------------------------------------------

_TEMPLATE_RE = re.compile(r"\{\{\s*([^}]*?)\s*\}\}")
EXPORT_TEMPLATE_VARS = ("run_id", "scenario_id")


def _export_to(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    for name in _TEMPLATE_RE.findall(value):
        if name not in EXPORT_TEMPLATE_VARS:
            raise ValueError(
                f"unknown template '{{{{ {name} }}}}' in '{value}' (expected {{{{ run_id }}}} or {{{{ scenario_id }}}})"
            )
    if value.startswith("/") or ".." in value.split("/"):
        raise ValueError(f"'{value}' must be a relative path inside the artifact store (no leading '/', no '..')")
    return value


ExportTo = Annotated[str, AfterValidator(_export_to)]


class AuditLogExport(SpecModel):
    type: Literal["audit_log"]
    to: ExportTo


class DbDumpExport(SpecModel):
    type: Literal["db_dump"]
    service: ServiceName
    to: ExportTo


class SnapshotExport(SpecModel):
    """The final workspace, as a tar archive."""

    type: Literal["snapshot"]
    to: ExportTo


Export = Annotated[AuditLogExport | DbDumpExport | SnapshotExport, Field(discriminator="type")]


class Teardown(SpecModel):
    always_run: bool = True
    export: list[Export] = Field(default_factory=list)


# --- score rules and alerts ----------------------------------------------------------------------


class AppliesTo(SpecModel):
    event_type: Literal["llm_call", "tool_use", "tool_call"] | None = None
    tool: str | None = None


class _ScoreRuleBase(SpecModel):
    name: NonEmptyStr
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    applies_to: AppliesTo | None = None


class LlmJudgeRule(_ScoreRuleBase):
    type: Literal["llm_judge"]
    rubric: NonEmptyStr
    model: str | None = None


class RegexRule(_ScoreRuleBase):
    type: Literal["regex"]
    pattern: NonEmptyStr

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except (re.error, OverflowError, RecursionError) as exc:
            raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        return value


class PythonRule(_ScoreRuleBase):
    type: Literal["python"]
    command: NonEmptyStr


ScoreRule = Annotated[LlmJudgeRule | RegexRule | PythonRule, Field(discriminator="type")]

ALERT_METRICS: tuple[str, ...] = (
    "pass_rate",
    "mean_wall_ms",
    "p95_wall_ms",
    "total_cost_usd",
    "mean_cost_per_run_usd",
    "tool_success_rate",
    "side_effect_violations",
    "mean_tool_calls",
)
ALERT_OPERATORS: tuple[str, ...] = ("<", "<=", ">", ">=", "==", "!=")
_CONDITION_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*")


def parse_alert_condition(condition: str) -> tuple[str, str, float]:
    """``"pass_rate < 0.8" -> ("pass_rate", "<", 0.8)``; ``ValueError`` with a clear message."""
    match = _CONDITION_RE.fullmatch(condition)
    if not match:
        raise ValueError(
            f"condition '{condition}' must look like '<metric> <operator> <value>', e.g. 'pass_rate < 0.8'"
        )
    metric, op, raw = match.groups()
    if metric not in ALERT_METRICS:
        raise ValueError(
            f"unknown metric '{metric}' in condition (expected one of {', '.join(ALERT_METRICS)})"
        )
    try:
        threshold = float(raw)
    except ValueError:
        raise ValueError(f"condition value '{raw}' is not a number") from None
    return metric, op, threshold


def _condition(value: str) -> str:
    parse_alert_condition(value)
    return value.strip()


def _window(value: str) -> str:
    match = re.fullmatch(r"last_(\d+)_runs|last_(\w+)", value.strip())
    if match and match.group(1):
        if int(match.group(1)) < 1:
            raise ValueError("window 'last_<n>_runs' needs n >= 1")
        return value.strip()
    if match and match.group(2):
        try:
            parse_duration(match.group(2))
            return value.strip()
        except ValueError:
            pass
    raise ValueError(f"invalid window '{value}' (expected last_<n>_runs or last_<duration>, e.g. last_5_runs, last_24h)")


class Alert(SpecModel):
    """Fires after an experiment of this spec when ``condition`` holds."""

    name: NonEmptyStr
    condition: Annotated[str, AfterValidator(_condition)]
    window: Annotated[str, AfterValidator(_window)] | None = None
    notify: Literal["chat", "webhook", "email"]
    slack_channel: str | None = None
    webhook_url: str | None = None

    @field_validator("webhook_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^\s/]+", value):
            raise ValueError(f"webhook_url '{value}' must be an http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _destination(self) -> Alert:
        if self.notify == "chat" and not self.slack_channel:
            raise ValueError("notify: chat needs slack_channel")
        if self.notify == "webhook" and not self.webhook_url:
            raise ValueError("notify: webhook needs webhook_url")
        return self

    def parsed_condition(self) -> tuple[str, str, float]:
        return parse_alert_condition(self.condition)

