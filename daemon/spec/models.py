"""The spec document: :class:`SpecDocument` and its invariants, plus the cross-field checks.

Field types and the smaller blocks live in ``types.py``, ``checks.py``, ``services.py`` and
``blocks.py``; everything is re-exported here and from ``daemon.spec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from .blocks import (
    AGENT_TYPES,
    INSTALLED_AGENT_PROVIDERS,
    ALERT_METRICS,
    ALERT_OPERATORS,
    Agent,
    Alert,
    AppliesTo,
    Audit,
    AuditLogExport,
    CliAgent,
    Clock,
    DbDumpExport,
    Determinism,
    Egress,
    Export,
    FileSystemAudit,
    Forbidden,
    ImageAgent,
    Ingress,
    IngressRule,
    LlmJudgeRule,
    Network,
    Parallelism,
    PythonRule,
    RegexRule,
    ReplicaAggregation,
    Resources,
    ScoreRule,
    Scoring,
    SecretSource,
    Setup,
    SnapshotAgent,
    SnapshotExport,
    Task,
    Teardown,
    parse_alert_condition,
    parse_secret_source,
)
from .build import Base
from .models_block import Models
from .checks import (
    CHECK_TYPES,
    Check,
    CommandExitCheck,
    CustomCheck,
    FileAbsentCheck,
    FileContentCheck,
    FileExistsCheck,
    HttpMockAssertion,
    HttpMockAssertionsCheck,
    LlmAsJudgeCheck,
    SqlCheck,
)
from .durations import format_duration, parse_duration
from .services import (
    DEFAULT_POSTGRES_IMAGE,
    DEFAULT_REDIS_IMAGE,
    SERVICE_TYPES,
    FileFixture,
    Fixture,
    GenericService,
    Healthcheck,
    HttpMockService,
    MockResponse,
    MockRoute,
    PostgresService,
    RedisService,
    Service,
    SqlFileFixture,
    SqlFixture,
    WaitFor,
)
from .types import EnvName, Identifier, SpecModel

__all__ = [
    # document
    "SpecDocument",
    "Invariant",
    "CROSS_FIELD_ERROR",
    "cross_field_issues",
    # checks
    "Check",
    "CHECK_TYPES",
    "CommandExitCheck",
    "FileExistsCheck",
    "FileAbsentCheck",
    "FileContentCheck",
    "SqlCheck",
    "HttpMockAssertion",
    "HttpMockAssertionsCheck",
    "CustomCheck",
    "LlmAsJudgeCheck",
    # services and fixtures
    "Service",
    "SERVICE_TYPES",
    "DEFAULT_POSTGRES_IMAGE",
    "DEFAULT_REDIS_IMAGE",
    "PostgresService",
    "RedisService",
    "HttpMockService",
    "GenericService",
    "WaitFor",
    "Healthcheck",
    "MockRoute",
    "MockResponse",
    "Fixture",
    "SqlFixture",
    "SqlFileFixture",
    "FileFixture",
    # blocks
    "Task",
    "Agent",
    "AGENT_TYPES",
    "SnapshotAgent",
    "CliAgent",
    "ImageAgent",
    "SecretSource",
    "parse_secret_source",
    "Setup",
    "Network",
    "Egress",
    "Ingress",
    "IngressRule",
    "Audit",
    "FileSystemAudit",
    "Forbidden",
    "Scoring",
    "ReplicaAggregation",
    "Parallelism",
    "Determinism",
    "Clock",
    "Resources",
    "Teardown",
    "Export",
    "AuditLogExport",
    "DbDumpExport",
    "SnapshotExport",
    "ScoreRule",
    "LlmJudgeRule",
    "RegexRule",
    "PythonRule",
    "AppliesTo",
    "Alert",
    "ALERT_METRICS",
    "ALERT_OPERATORS",
    "parse_alert_condition",
]

CROSS_FIELD_ERROR = "spec_cross_field"
"""pydantic error type raised by :class:`SpecDocument` for references between blocks; its context
holds ``issues``: a list of ``(loc tuple, message)`` the loader reports one by one."""


class Invariant(SpecModel):
    """A postcondition checked after the agent finishes; scores 0..1."""

    description: str | None = None
    weight: float = Field(default=1.0, gt=0)
    gate: bool = False
    """A failing gate forces the composite score to 0."""
    check: Check


def _non_empty_invariants(value: dict[str, Invariant]) -> dict[str, Invariant]:
    if not value:
        raise ValueError("at least one invariant is required")
    return value


def _scenario_name(value: str) -> str:
    if value == "(no matrix)":
        return value
    pairs = value.split(",")
    if not value or any("=" not in pair or not pair.split("=", 1)[0].strip() for pair in pairs):
        raise ValueError(f"invalid scenario name '{value}': name a scenario by its matrix entry as key=value[,key=value...], "
                         "or '(no matrix)'")
    return value


class SpecDocument(SpecModel):
    """A spec: the sandbox's shape and what correct means. Required: version, id, base, task,
    invariants."""

    version: int = Field(ge=1)
    id: Identifier
    description: str | None = None
    base: Base
    task: Task
    agent: Agent | None = None
    services: list[Service] = Field(default_factory=list)
    fixtures: list[Fixture] = Field(default_factory=list)
    secrets: dict[EnvName, SecretSource] = Field(default_factory=dict)
    setup: Setup = Field(default_factory=Setup)
    network: Network = Field(default_factory=Network)
    audit: Audit = Field(default_factory=Audit)
    invariants: Annotated[dict[Identifier, Invariant], AfterValidator(_non_empty_invariants)]
    forbidden: Forbidden = Field(default_factory=Forbidden)
    scoring: Scoring = Field(default_factory=Scoring)
    parallelism: Parallelism = Field(default_factory=Parallelism)
    determinism: Determinism = Field(default_factory=Determinism)
    resources: Resources = Field(default_factory=Resources)
    teardown: Teardown = Field(default_factory=Teardown)
    score_rules: list[ScoreRule] = Field(default_factory=list)
    alerts: list[Alert] = Field(default_factory=list)
    models: Models | None = None
    quarantine: list[Annotated[str, AfterValidator(_scenario_name)]] = Field(default_factory=list, description=(
        "scenarios that are run and reported but not gated (flaky ones under repair): each names scenarios by matrix "
        "entry as `key=value[,key=value...]`, the label the reports show, and holds every scenario whose matrix entry has "
        "those values (`(no matrix)` is the one scenario of a spec without a matrix); `svc eval compare` leaves them out "
        "of the paired tests and lists them as quarantined"))

    @model_validator(mode="after")
    def _cross_field(self) -> SpecDocument:
        issues = cross_field_issues(self.model_dump(by_alias=True))
        if issues:
            summary = "; ".join(".".join(str(p) for p in loc) + ": " + msg for loc, msg in issues)
            raise PydanticCustomError(CROSS_FIELD_ERROR, "{summary}", {"summary": summary, "issues": issues})
        return self

    # --- helpers for the rest of the daemon ------------------------------------------------------

    def service(self, name: str) -> Service | None:
        """The declared service called ``name``, or ``None``."""
        for svc in self.services:
            if svc.name == name:
                return svc
        return None

    def total_runs(self) -> int:
        """Runs of one experiment: replicas x matrix entries (at least one entry)."""
        return self.parallelism.replicas * max(1, len(self.parallelism.matrix))

    def matrix_entries(self) -> list[dict[str, Any]]:
        """The matrix, or ``[{}]`` when none is declared, so callers can always iterate."""
        return [dict(entry) for entry in self.parallelism.matrix] or [{}]

    def secret_names(self) -> list[str]:
        """Declared secret names, in declaration order."""
        return list(self.secrets)

    def agent_timeout(self) -> float:
        """The agent timeout in seconds (default 5m when no agent block is given)."""
        return self.agent.timeout if self.agent is not None else 300.0


# --- cross-field checks --------------------------------------------------------------------------

Loc = tuple[str | int, ...]


def cross_field_issues(data: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """References between blocks, checked on plain data (a validated dump or raw YAML data).

    Anything malformed is skipped: the model validation reports it. Returns ``(loc, message)``.
    """
    issues: list[tuple[Loc, str]] = []
    services: dict[str, str] = {}
    records: dict[str, bool] = {}
    first_at: dict[str, int] = {}

    raw_services = data.get("services")
    if isinstance(raw_services, list):
        for i, svc in enumerate(raw_services):
            if not isinstance(svc, Mapping) or not isinstance(svc.get("name"), str):
                continue
            name = svc["name"]
            if name in first_at:
                issues.append(
                    (("services", i, "name"), f"duplicate service name '{name}' (first at services.{first_at[name]})")
                )
                continue
            first_at[name] = i
            kind = svc.get("type", "generic")
            services[name] = kind if isinstance(kind, str) else "generic"
            records[name] = svc.get("record") is True

    declared = ", ".join(services) if services else ""

    def ref(loc: Loc, name: Any, need: str | None, what: str) -> None:
        if not isinstance(name, str):
            return
        if name not in services:
            hint = f"declared services: {declared}" if declared else "no services are declared"
            issues.append((loc, f"unknown service '{name}' ({hint})"))
        elif need is not None and services[name] != need:
            article = "an" if need[0] in "aeiou" else "a"
            issues.append(
                (loc, f"service '{name}' is a {services[name]} service; {what} need {article} {need} service")
            )

    fixtures = data.get("fixtures")
    if isinstance(fixtures, list):
        for i, fx in enumerate(fixtures):
            if isinstance(fx, Mapping) and "service" in fx:
                what = "sql fixtures" if "sql" in fx else "SQL file fixtures"
                ref(("fixtures", i, "service"), fx["service"], "postgres", what)

    invariants = data.get("invariants")
    if isinstance(invariants, Mapping):
        for name, inv in invariants.items():
            check = inv.get("check") if isinstance(inv, Mapping) else None
            if not isinstance(check, Mapping) or "service" not in check:
                continue
            loc: Loc = ("invariants", name, "check", "service")
            kind = check.get("type")
            if kind == "sql":
                ref(loc, check["service"], "postgres", "sql checks")
            elif kind == "http_mock_assertions":
                before = len(issues)
                ref(loc, check["service"], "http_mock", "http_mock_assertions checks")
                svc_name = check["service"]
                if len(issues) == before and isinstance(svc_name, str) and not records.get(svc_name):
                    issues.append(
                        (loc, f"http_mock_assertions need service '{svc_name}' to record requests: set record: true on it")
                    )

    forbidden = data.get("forbidden")
    if isinstance(forbidden, Mapping):
        http_except = forbidden.get("http_except")
        if isinstance(http_except, list):
            for i, name in enumerate(http_except):
                ref(("forbidden", "http_except", i), name, None, "")
        if forbidden.get("secrets_in_logs") == "deny":
            audit = data.get("audit")
            if not (isinstance(audit, Mapping) and audit.get("stdout_capture") is True):
                issues.append(
                    (("forbidden", "secrets_in_logs"), "secrets_in_logs: deny needs audit.stdout_capture: true")
                )

    models = data.get("models")
    providers = models.get("providers") if isinstance(models, Mapping) else None
    if isinstance(providers, Mapping):
        secrets = data.get("secrets") if isinstance(data.get("secrets"), Mapping) else {}
        for name, provider in providers.items():
            key = provider.get("key") if isinstance(provider, Mapping) else None
            if isinstance(key, str) and key not in secrets:
                issues.append((("models", "providers", name, "key"),
                               f"'{key}' is not a declared secret: declare it under secrets: (e.g. {key}: env)"))

    installed = data.get("agent")
    needs = INSTALLED_AGENT_PROVIDERS.get(installed.get("name")) if isinstance(installed, Mapping) \
        and installed.get("type") == "installed" and isinstance(installed.get("name"), str) else None
    if needs and not isinstance(providers, Mapping):
        issues.append((("agent",), f"the installed agent '{installed['name']}' reaches its model through the model "
                                   f"gateway: add a models: block with an {needs} provider (models.providers.{needs})"))
    elif needs and needs not in providers:
        issues.append((("models", "providers"), f"the installed agent '{installed['name']}' speaks the {needs} API: "
                                                f"add models.providers.{needs}"))

    network = data.get("network")
    if isinstance(network, Mapping) and isinstance(network.get("dns_overrides"), Mapping):
        for host, target in network["dns_overrides"].items():
            ref(("network", "dns_overrides", host), target, None, "")

    teardown = data.get("teardown")
    exports = teardown.get("export") if isinstance(teardown, Mapping) else None
    if isinstance(exports, list):
        for i, ex in enumerate(exports):
            if isinstance(ex, Mapping) and ex.get("type") == "db_dump":
                if "service" in ex:
                    ref(("teardown", "export", i, "service"), ex["service"], "postgres", "db_dump exports")

    agent = data.get("agent")
    resources = data.get("resources")
    if isinstance(agent, Mapping) and isinstance(resources, Mapping) and resources.get("timeout") is not None:
        try:
            agent_timeout = parse_duration(agent.get("timeout", 300.0))
            sandbox_timeout = parse_duration(resources["timeout"])
        except ValueError:
            pass
        else:
            if agent_timeout > sandbox_timeout:
                issues.append(
                    (
                        ("agent", "timeout") if "timeout" in agent else ("resources", "timeout"),
                        f"agent timeout ({format_duration(agent_timeout)}) exceeds resources.timeout "
                        f"({format_duration(sandbox_timeout)}), which covers setup, agent and scoring",
                    )
                )
    return issues
