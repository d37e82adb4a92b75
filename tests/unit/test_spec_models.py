"""The spec models: every check type, services, blocks, helpers, durations, JSON schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from daemon.spec import (
    CliAgent,
    CommandExitCheck,
    CustomCheck,
    FileAbsentCheck,
    FileContentCheck,
    FileExistsCheck,
    FileFixture,
    GenericService,
    HttpMockAssertionsCheck,
    HttpMockService,
    ImageAgent,
    LlmAsJudgeCheck,
    PostgresService,
    RedisService,
    SnapshotAgent,
    SpecDocument,
    SqlCheck,
    SqlFileFixture,
    SqlFixture,
    format_duration,
    format_size,
    load_spec_file,
    parse_alert_condition,
    parse_duration,
    parse_secret_source,
    parse_size,
)
from tests.support.images import POSTGRES, PYTHON, REDIS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def minimal(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": 1,
        "id": "demo",
        "base": PYTHON,
        "task": {"prompt": "do the thing"},
        "invariants": {"done": {"check": {"type": "file_exists", "path": "done.txt"}}},
    }
    doc.update(extra)
    return doc


def check(spec: dict[str, Any], **extra: Any) -> Any:
    doc = SpecDocument.model_validate(minimal(invariants={"c": {"check": spec}}, **extra))
    return doc.invariants["c"].check


# --- durations and sizes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5s", 1.5),
        ("2d", 172800.0),
        ("1m 30s", 90.0),
        ("45", 45.0),
        (30, 30.0),
        (2.5, 2.5),
        (0, 0.0),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "abc", "5x", "m5", "-5s", "5m5m", -1, True, None, [1], "1h-30m"])
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid duration|non-negative"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300.0, "5m"), (5400, "1h30m"), (0.25, "250ms"), (90, "1m30s"), (0, "0s"), (1.5, "1s500ms"), (86400, "1d")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0.0, 0.001, 1.0, 59.999, 60.0, 3599.5, 5400.0, 90061.25])
def test_durations_round_trip(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_sizes_round_trip() -> None:
    assert parse_size("1g") == 1024**3
    assert parse_size("512m") == 512 * 1024**2
    assert parse_size("2GiB") == 2 * 1024**3
    assert parse_size(4096) == 4096
    assert format_size(1024**3) == "1g"
    assert format_size(1536 * 1024**2) == "1536m"
    with pytest.raises(ValueError, match="invalid size"):
        parse_size("lots")


# --- the example ---------------------------------------------------------------------------------


def test_quickstart_example_loads_and_round_trips() -> None:
    doc = load_spec_file(EXAMPLES / "quickstart.yaml")
    assert doc.base == PYTHON
    assert isinstance(doc.agent, CliAgent) and doc.agent.timeout == 120.0
    assert [s.name for s in doc.services] == ["db", "cache"]
    assert isinstance(doc.service("db"), PostgresService)
    assert isinstance(doc.service("cache"), RedisService)
    assert doc.service("nope") is None
    assert doc.scoring.pass_threshold == 0.8
    assert doc.scoring.replica_aggregation.strategy == "majority"
    assert {type(inv.check) for inv in doc.invariants.values()} >= {FileExistsCheck, CommandExitCheck, SqlCheck}
    assert doc.forbidden.http_except == []
    assert doc.resources.memory == 1024**3
    # JSON round trip: durations and sizes come back as strings and re-validate to the same model
    dumped = doc.model_dump(mode="json")
    assert dumped["agent"]["timeout"] == "2m"
    assert dumped["resources"]["memory"] == "1g"
    assert SpecDocument.model_validate(dumped) == doc
    assert SpecDocument.model_validate_json(doc.model_dump_json()) == doc
    assert SpecDocument.model_validate(doc.model_dump()) == doc


def test_json_schema_works() -> None:
    schema = SpecDocument.model_json_schema()
    json.dumps(schema)
    assert set(schema["required"]) == {"version", "id", "base", "task", "invariants"}
    assert schema["additionalProperties"] is False
    check_union = schema["$defs"]["Invariant"]["properties"]["check"]
    assert set(check_union["discriminator"]["mapping"]) == {
        "command_exit", "file_exists", "file_absent", "file_content", "sql",
        "http_mock_assertions", "custom", "llm_as_judge", "effects",
    }  # fmt: skip
    SpecDocument.model_json_schema(mode="serialization")


# --- checks --------------------------------------------------------------------------------------


def test_each_check_type_parses() -> None:
    services = [
        {"name": "db", "type": "postgres"},
        {"name": "api", "type": "http_mock", "record": True},
    ]
    c = check({"type": "command_exit", "command": "pytest -q", "timeout": "30s"})
    assert isinstance(c, CommandExitCheck) and c.expect_exit_code == 0 and c.timeout == 30.0
    assert isinstance(check({"type": "file_exists", "path": "out/a.txt"}), FileExistsCheck)
    assert isinstance(check({"type": "file_absent", "path": "/workspace/tmp.lock"}), FileAbsentCheck)
    c = check({"type": "file_content", "path": "a.txt", "regex": "^ok$"})
    assert isinstance(c, FileContentCheck) and c.regex == "^ok$"
    c = check({"type": "sql", "service": "db", "query": "select 1", "expect_scalar": 1}, services=services)
    assert isinstance(c, SqlCheck) and c.expect_scalar == 1
    c = check({"type": "sql", "service": "db", "query": "select 1", "expect": [[1]]}, services=services)
    assert c.expect == [[1]]
    c = check(
        {
            "type": "http_mock_assertions",
            "service": "api",
            "assertions": [{"method": "post", "path": "/charge", "count": 1, "body_contains": "usd"}],
        },
        services=services,
    )
    assert isinstance(c, HttpMockAssertionsCheck) and c.assertions[0].method == "POST"
    assert isinstance(check({"type": "custom", "command": "./score.sh"}), CustomCheck)
    c = check({"type": "llm_as_judge", "rubric": "Is it polite?", "inputs": ["reply.txt"]})
    assert isinstance(c, LlmAsJudgeCheck) and c.threshold == 0.5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "file_content", "path": "a"}, "exactly one of contains, regex, equals"),
        ({"type": "file_content", "path": "a", "contains": "x", "equals": "y"}, "exactly one"),
        ({"type": "file_content", "path": "a", "regex": "("}, "invalid regular expression"),
        ({"type": "file_exists", "path": "../etc/passwd"}, "must not contain '..'"),
        ({"type": "file_exists", "path": "/etc/passwd"}, "start with /workspace/"),
        ({"type": "command_exit", "command": ""}, "must not be empty"),
        ({"type": "llm_as_judge", "rubric": "r", "threshold": 2}, "less than or equal"),
    ],
)
def test_check_parameter_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check(spec)


def test_sql_check_needs_exactly_one_expectation() -> None:
    services = [{"name": "db", "type": "postgres"}]
    with pytest.raises(ValidationError, match="exactly one of expect_rows, expect_scalar, expect"):
        check({"type": "sql", "service": "db", "query": "q"}, services=services)
    with pytest.raises(ValidationError, match=r"\(got expect_rows, expect_scalar\)"):
        check({"type": "sql", "service": "db", "query": "q", "expect_rows": 1, "expect_scalar": 2}, services=services)
    c = check({"type": "sql", "service": "db", "query": "q", "expect_scalar": None}, services=services)
    assert c.expect_scalar is None  # expecting NULL is allowed


def test_http_mock_assertion_counts() -> None:
    services = [{"name": "api", "type": "http_mock", "record": True}]
    base = {"type": "http_mock_assertions", "service": "api"}
    with pytest.raises(ValidationError, match="needs one of count, min_count, max_count"):
        check({**base, "assertions": [{"path": "/x"}]}, services=services)
    with pytest.raises(ValidationError, match="either count, or min_count/max_count"):
        check({**base, "assertions": [{"path": "/x", "count": 1, "max_count": 2}]}, services=services)
    c = check({**base, "assertions": [{"path": "/x", "min_count": 1, "max_count": 3}]}, services=services)
    assert c.assertions[0].method == "GET"


# --- services, fixtures, agent -------------------------------------------------------------------


def test_services_by_type_and_defaults() -> None:
    doc = SpecDocument.model_validate(
        minimal(
            services=[
                {"name": "db", "type": "postgres"},
                {"name": "cache", "type": "redis"},
                {"name": "payments", "type": "http_mock", "routes": [{"path": "/charge", "response": {"body": {"ok": True}}}]},
                {"name": "search", "image": "docker.io/library/nginx:1.25", "ports": [80], "env": {"PORT": 80, "DEBUG": True}},
            ]
        )
    )
    db, cache, mock, generic = doc.services
    assert isinstance(db, PostgresService) and db.image == POSTGRES
    assert isinstance(cache, RedisService) and cache.image == REDIS
    assert isinstance(mock, HttpMockService) and mock.image is None
    assert mock.routes[0].method == "GET" and mock.routes[0].response.status == 200
    assert isinstance(generic, GenericService) and generic.type == "generic"
    assert generic.env == {"PORT": "80", "DEBUG": "true"}


@pytest.mark.parametrize("name", ["DB", "my_db", "-db", "db-", "9db", "a" * 64])
def test_service_names_must_be_dns_safe(name: str) -> None:
    with pytest.raises(ValidationError, match="not DNS-safe"):
        SpecDocument.model_validate(minimal(services=[{"name": name, "type": "redis"}]))


@pytest.mark.parametrize(
    "image",
    [PYTHON, "docker.io/library/python:3.11", "ghcr.io/org/app@sha256:" + "a" * 64, "localhost:5000/x/y"],
)
def test_qualified_images_accepted(image: str) -> None:
    assert SpecDocument.model_validate(minimal(base=image)).base == image


@pytest.mark.parametrize(
    ("image", "suggestion"),
    [("python:3.11", "docker.io/library/python:3.11"), ("myorg/app:1", "docker.io/myorg/app:1")],
)
def test_unqualified_images_rejected(image: str, suggestion: str) -> None:
    with pytest.raises(ValidationError, match=f"must be fully qualified with a registry, e.g. {suggestion}"):
        SpecDocument.model_validate(minimal(base=image))


def test_fixture_shapes() -> None:
    doc = SpecDocument.model_validate(
        minimal(
            services=[{"name": "db", "type": "postgres"}],
            fixtures=[{"service": "db", "sql": "select 1"}, {"service": "db", "path": "seed.sql"}, {"path": "data/"}],
        )
    )
    sql, sql_file, files = doc.fixtures
    assert isinstance(sql, SqlFixture) and isinstance(sql_file, SqlFileFixture)
    assert isinstance(files, FileFixture) and files.to == "/workspace"


def test_agent_types() -> None:
    agent = SpecDocument.model_validate(minimal(agent={"type": "snapshot", "snapshot": "my-agent", "entrypoint": "python main.py --fast"})).agent
    assert isinstance(agent, SnapshotAgent) and agent.entrypoint == ["python", "main.py", "--fast"]
    assert agent.timeout == 300.0
    agent = SpecDocument.model_validate(minimal(agent={"type": "image", "image": "localhost/me/agent:1", "command": ["run"]})).agent
    assert isinstance(agent, ImageAgent)
    with pytest.raises(ValidationError, match="exactly one of snapshot"):
        SpecDocument.model_validate(minimal(agent={"type": "snapshot"}))
    assert SpecDocument.model_validate(minimal()).agent_timeout() == 300.0


# --- other blocks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "parsed"),
    [
        ("env", ("env", None)),
        ("env:OTHER_NAME", ("env", "OTHER_NAME")),
        ("file:~/.tokens/x", ("file", "~/.tokens/x")),
        ("command:pass show svc/signing", ("command", "pass show svc/signing")),
        ("dashboard", ("dashboard", None)),
    ],
)
def test_secret_sources(source: str, parsed: tuple[str, str | None]) -> None:
    assert parse_secret_source(source) == parsed
    doc = SpecDocument.model_validate(minimal(secrets={"API_KEY": source}))
    assert doc.secret_names() == ["API_KEY"]


@pytest.mark.parametrize("bad", ["vault:x", "env:", "env:not-valid", "file", ""])
def test_bad_secret_sources(bad: str) -> None:
    with pytest.raises(ValueError, match="secret 'TOKEN'"):
        parse_secret_source(bad, name="TOKEN")


def test_replica_aggregation_rules() -> None:
    with pytest.raises(ValidationError, match="needs min_pass_rate"):
        SpecDocument.model_validate(minimal(scoring={"replica_aggregation": {"strategy": "percentage"}}))
    doc = SpecDocument.model_validate(
        minimal(scoring={"replica_aggregation": {"strategy": "percentage", "min_pass_rate": 0.9}})
    )
    assert doc.scoring.replica_aggregation.min_pass_rate == 0.9
    assert SpecDocument.model_validate(minimal()).scoring.pass_threshold == 1.0


def test_total_runs_and_matrix() -> None:
    assert SpecDocument.model_validate(minimal()).total_runs() == 1
    assert SpecDocument.model_validate(minimal()).matrix_entries() == [{}]
    doc = SpecDocument.model_validate(
        minimal(parallelism={"replicas": 3, "matrix": [{"model": "a"}, {"model": "b"}]})
    )
    assert doc.total_runs() == 6


def test_determinism_clock_forms() -> None:
    doc = SpecDocument.model_validate(minimal(determinism={"clock": "2024-01-01T00:00:00Z", "seed": 7, "dns": "static"}))
    assert doc.determinism.clock is not None and doc.determinism.clock.mode == "frozen"
    assert doc.determinism.clock.at.year == 2024 and doc.determinism.clock.at.utcoffset() is not None
    doc = SpecDocument.model_validate(minimal(determinism={"clock": {"at": "2024-06-01T12:00:00", "mode": "ticking"}, "seed": "abc"}))
    assert doc.determinism.clock is not None and doc.determinism.clock.mode == "ticking"


def test_alerts() -> None:
    assert parse_alert_condition("pass_rate < 0.8") == ("pass_rate", "<", 0.8)
    doc = SpecDocument.model_validate(
        minimal(alerts=[{"name": "slow", "condition": "p95_wall_ms >= 60000", "window": "last_5_runs", "notify": "webhook", "webhook_url": "https://example.com/hook"}])
    )
    assert doc.alerts[0].parsed_condition() == ("p95_wall_ms", ">=", 60000.0)
    with pytest.raises(ValidationError, match="unknown metric 'pas_rate'"):
        SpecDocument.model_validate(minimal(alerts=[{"name": "x", "condition": "pas_rate < 1", "notify": "email"}]))
    with pytest.raises(ValidationError, match="must look like '<metric> <operator> <value>'"):
        SpecDocument.model_validate(minimal(alerts=[{"name": "x", "condition": "pass_rate is low", "notify": "email"}]))
    with pytest.raises(ValidationError, match="notify: chat needs slack_channel"):
        SpecDocument.model_validate(minimal(alerts=[{"name": "x", "condition": "pass_rate < 1", "notify": "chat"}]))


def test_teardown_export_templates() -> None:
    services = [{"name": "db", "type": "postgres"}]
    doc = SpecDocument.model_validate(
        minimal(services=services, teardown={"export": [{"type": "db_dump", "service": "db", "to": "{{ run_id }}/db.sql"}]})
    )
    assert doc.teardown.always_run is True
    with pytest.raises(ValidationError, match="service"):
        SpecDocument.model_validate(minimal(services=services, teardown={"export": [{"type": "db_dump", "to": "x"}]}))
    with pytest.raises(ValidationError, match=r"unknown template '\{\{ user \}\}'"):
        SpecDocument.model_validate(minimal(teardown={"export": [{"type": "audit_log", "to": "{{ user }}/a"}]}))


def test_score_rules() -> None:
    doc = SpecDocument.model_validate(
        minimal(
            score_rules=[
                {"name": "polite", "type": "llm_judge", "rubric": "Was it polite?", "applies_to": {"event_type": "llm_call"}},
                {"name": "no-sql", "type": "regex", "pattern": "DROP TABLE"},
                {"name": "py", "type": "python", "command": "python score.py", "threshold": 0.7},
            ]
        )
    )
    assert [r.type for r in doc.score_rules] == ["llm_judge", "regex", "python"]


def test_identifiers() -> None:
    for good in ["demo", "my-spec_v1.2"]:
        assert SpecDocument.model_validate(minimal(id=good)).id == good
    for bad in ["a/b", "a..b", "", "-x", "has space"]:
        with pytest.raises(ValidationError, match="invalid identifier"):
            SpecDocument.model_validate(minimal(id=bad))


def test_cross_field_checks_on_the_model() -> None:
    with pytest.raises(ValidationError) as info:
        SpecDocument.model_validate(
            minimal(
                services=[{"name": "cache", "type": "redis"}],
                fixtures=[{"service": "cache", "sql": "select 1"}],
                forbidden={"http_except": ["payments"], "secrets_in_logs": "deny"},
                network={"dns_overrides": {"api.stripe.com": "stripe"}},
            )
        )
    text = str(info.value)
    assert "fixtures.0.service: service 'cache' is a redis service; sql fixtures need a postgres service" in text
    assert "forbidden.http_except.0: unknown service 'payments' (declared services: cache)" in text
    assert "network.dns_overrides.api.stripe.com: unknown service 'stripe'" in text
    assert "secrets_in_logs: deny needs audit.stdout_capture: true" in text


def test_http_mock_assertions_need_a_recording_mock() -> None:
    spec = {"type": "http_mock_assertions", "service": "api", "assertions": [{"path": "/x", "count": 1}]}
    with pytest.raises(ValidationError, match="set record: true"):
        check(spec, services=[{"name": "api", "type": "http_mock"}])


def test_agent_timeout_within_sandbox_timeout() -> None:
    with pytest.raises(ValidationError, match=r"agent timeout \(10m\) exceeds resources.timeout \(5m\)"):
        SpecDocument.model_validate(
            minimal(agent={"type": "cli", "binary": "x", "timeout": "10m"}, resources={"timeout": "5m"})
        )
