"""The YAML loader: what a user sees when a spec is wrong (path, line, message), and that good
specs load."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from daemon.spec import (
    SpecDocument,
    SpecIssue,
    SpecValidationError,
    load_spec,
    load_spec_file,
    validate_spec_data,
)
from tests.support.images import PYTHON

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HEAD = f"""\
version: 1
id: demo
base: {PYTHON}
task:
  prompt: do the thing
"""  # lines 1-5


def spec(body: str, head: str = HEAD) -> str:
    return head + textwrap.dedent(body)


def errors_of(text: str, source: str = "spec.yaml") -> SpecValidationError:
    with pytest.raises(SpecValidationError) as info:
        load_spec(text, source=source)
    return info.value


def only_issue(text: str) -> SpecIssue:
    err = errors_of(text)
    assert len(err.issues) == 1, str(err)
    return err.issues[0]


def test_examples() -> None:
    doc = load_spec_file(EXAMPLES / "quickstart.yaml")
    assert isinstance(doc, SpecDocument) and doc.id == "quickstart"
    with pytest.raises(SpecValidationError) as info:
        load_spec_file(EXAMPLES / "broken.yaml")
    assert [(i.loc, i.line) for i in info.value.issues] == [
        ("agent.timout", 14),
        ("invariants.tests.check.type", 20),
    ]


def test_valid_spec_loads() -> None:
    doc = load_spec(
        spec(
            """\
            invariants:
              done:
                check: {type: file_exists, path: done.txt}
            """
        )
    )
    assert list(doc.invariants) == ["done"]


def test_typo_in_check_type() -> None:
    text = spec(
        """\
        invariants:
          tests:
            weight: 2
            check:
              type: comand_exit
              command: pytest -q
        """
    )
    err = errors_of(text)
    assert str(err) == (
        "spec.yaml:10 invariants.tests.check.type: unknown check type 'comand_exit' (expected one of "
        "command_exit, file_exists, file_absent, file_content, sql, http_mock_assertions, custom, llm_as_judge, effects)"
    )
    assert err.details() == {
        "errors": [
            {
                "loc": "invariants.tests.check.type",
                "line": 10,
                "msg": err.issues[0].msg,
            }
        ]
    }


def test_unknown_key() -> None:
    issue = only_issue(
        spec(
            """\
            invariants:
              tests:
                check:
                  type: command_exit
                  command: pytest
                  expect_exit_code: 0
                  comand: pytest -q
            """
        )
    )
    assert issue == SpecIssue(
        "invariants.tests.check.comand",
        12,
        "unknown key 'comand' (expected one of: command, expect_exit_code, timeout, isolation)",
    )


def test_unknown_top_level_key() -> None:
    issue = only_issue(
        spec(
            """\
            invarients:
              a: {check: {type: file_exists, path: a}}
            invariants:
              a: {check: {type: file_exists, path: a}}
            """
        )
    )
    assert (issue.loc, issue.line) == ("invarients", 6)
    assert issue.msg.startswith("unknown key 'invarients' (expected one of: version, id, description, base, task,")


def test_duplicate_key() -> None:
    err = errors_of(
        spec(
            """\
            invariants:
              tests:
                check: {type: file_exists, path: a}
              other:
                check: {type: file_exists, path: b}
              tests:
                check: {type: file_exists, path: c}
            """
        )
    )
    assert str(err) == "spec.yaml:11 invariants.tests: duplicate key 'tests' (first at line 7)"


def test_wrong_type() -> None:
    issue = only_issue(
        spec(
            """\
            parallelism:
              replicas: abc
            invariants:
              a: {check: {type: file_exists, path: a}}
            """
        )
    )
    assert issue == SpecIssue("parallelism.replicas", 7, "expected an integer, got 'abc'")


def test_wrong_type_for_a_block() -> None:
    issue = only_issue(spec("invariants:\n  a:\n    check: file_exists\n"))
    assert issue == SpecIssue("invariants.a.check", 8, "expected a mapping, got 'file_exists'")


def test_missing_required_key() -> None:
    text = f"""\
version: 1
id: demo
base: {PYTHON}
task:
  inputs: {{x: 1}}
invariants:
  a: {{check: {{type: file_exists, path: a}}}}
"""
    assert only_issue(text) == SpecIssue("task.prompt", 4, "missing required key 'prompt'")


def test_missing_check_type() -> None:
    issue = only_issue(spec("invariants:\n  a:\n    check: {command: pytest}\n"))
    assert (issue.loc, issue.line) == ("invariants.a.check.type", 8)
    assert issue.msg.startswith("missing required key 'type' (expected one of command_exit, ")


def test_missing_top_level_keys_and_empty_invariants() -> None:
    err = errors_of("version: 1\nid: demo\ninvariants: {}\n")
    assert [(i.loc, i.msg) for i in err.issues] == [
        ("invariants", "at least one invariant is required"),
        ("base", "missing required key 'base'"),
        ("task", "missing required key 'task'"),
    ]
    assert err.issues[0].line == 3 and err.issues[1].line is None


def test_unqualified_image() -> None:
    text = spec(
        """\
        services:
          - name: db
            type: postgres
          - name: search
            image: python:3.11
        invariants:
          a: {check: {type: file_exists, path: a}}
        """
    )
    assert only_issue(text) == SpecIssue(
        "services.1.image",
        10,
        "image reference 'python:3.11' must be fully qualified with a registry, e.g. docker.io/library/python:3.11",
    )
    assert str(errors_of(text.replace(PYTHON, "python:3.11"))).startswith(
        "spec.yaml:3 base: image reference 'python:3.11' must be fully qualified"
    )


def test_bad_duration() -> None:
    issue = only_issue(
        spec(
            """\
            agent:
              type: cli
              binary: python3
              timeout: 5 minutes
            invariants:
              a: {check: {type: file_exists, path: a}}
            """
        )
    )
    assert issue.loc == "agent.timeout" and issue.line == 9
    assert issue.msg == (
        "invalid duration '5 minutes': expected seconds as a number or a string like '90s', '5m', '1h30m', '250ms'"
    )


def test_bad_secret_source() -> None:
    issue = only_issue(
        spec(
            """\
            secrets:
              OPENAI_API_KEY: env
              STRIPE_KEY: vault:stripe
            invariants:
              a: {check: {type: file_exists, path: a}}
            """
        )
    )
    assert issue == SpecIssue(
        "secrets.STRIPE_KEY",
        8,
        "secret 'STRIPE_KEY' has an unknown source 'vault:stripe' "
        "(expected env, env:<NAME>, file:<path>, command:<cmd> or dashboard)",
    )


def test_bad_secret_name() -> None:
    issue = only_issue(spec("secrets:\n  stripe-key: env\ninvariants:\n  a: {check: {type: file_exists, path: a}}\n"))
    assert (issue.loc, issue.line) == ("secrets.stripe-key", 7)
    assert "invalid environment variable name 'stripe-key'" in issue.msg


def test_sql_check_names_undeclared_service() -> None:
    text = spec(
        """\
        services:
          - name: db
            type: postgres
          - name: cache
            type: redis
        invariants:
          rows:
            check:
              type: sql
              service: dbx
              query: select count(*) from users
              expect_scalar: 3
          cached:
            check:
              type: sql
              service: cache
              query: select 1
              expect_rows: 1
        """
    )
    err = errors_of(text)
    assert str(err) == (
        "spec.yaml:15 invariants.rows.check.service: unknown service 'dbx' (declared services: db, cache)\n"
        "spec.yaml:21 invariants.cached.check.service: service 'cache' is a redis service; "
        "sql checks need a postgres service"
    )


def test_cross_field_issues_reported_with_other_issues() -> None:
    err = errors_of(
        spec(
            """\
            fixtures:
              - service: db
                sql: select 1
            invariants:
              a: {check: {type: file_exist, path: a}}
            """
        )
    )
    assert [(i.line, i.loc) for i in err.issues] == [(7, "fixtures.0.service"), (10, "invariants.a.check.type")]
    assert err.issues[0].msg == "unknown service 'db' (no services are declared)"


def test_invalid_yaml_syntax() -> None:
    text = spec(
        """\
        invariants:
          a:
            check: {type: file_exists, path: a
          b: 1
        """
    )
    issue = only_issue(text)
    assert issue.loc == "" and issue.line == 9
    assert issue.msg.startswith("invalid YAML: while parsing a flow mapping")
    assert str(errors_of(text, source="my.yaml")).startswith("my.yaml:9: invalid YAML:")


def test_tab_indentation() -> None:
    issue = only_issue(HEAD + "invariants:\n\ta: 1\n")
    assert issue.line == 7 and "cannot start any token" in issue.msg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the spec is empty"),
        ("# only a comment\n", "the spec is empty"),
        ("- a\n- b\n", "expected a mapping at the top level"),
        ("just text\n", "expected a mapping at the top level"),
    ],
)
def test_empty_or_not_a_mapping(text: str, message: str) -> None:
    assert message in only_issue(text).msg


def test_multiple_documents_rejected() -> None:
    assert "expected a single document" in only_issue(HEAD + "---\nversion: 2\n").msg


def test_all_issues_reported_sorted_by_line() -> None:
    err = errors_of(
        spec(
            """\
            parallelism:
              replicas: 0
            network:
              egress:
                default: maybe
            services:
              - name: My_DB
                type: postgres
            invariants:
              a:
                weight: -1
                check: {type: file_exists, path: a}
            """
        )
    )
    assert [(i.line, i.loc, i.msg) for i in err.issues] == [
        (7, "parallelism.replicas", "must be at least 1, got 0"),
        (10, "network.egress.default", "expected one of deny, allow, got 'maybe'"),
        (
            12,
            "services.0.name",
            "service name 'My_DB' is not DNS-safe: use lowercase letters, digits and '-', "
            "starting with a letter and not ending with '-' (at most 63 characters)",
        ),
        (16, "invariants.a.weight", "must be greater than 0, got -1"),
    ]


def test_union_tag_dropped_from_paths() -> None:
    issue = only_issue(
        spec(
            """\
            services:
              - name: api
                type: http_mock
                routes:
                  - path: /x
                    respons: {status: 200}
            invariants:
              a: {check: {type: file_exists, path: a}}
            """
        )
    )
    assert issue == SpecIssue(
        "services.0.routes.0.respons", 11, "unknown key 'respons' (expected one of: method, path, response)"
    )


def test_timestamps_stay_strings_and_clock_errors_point_at_clock() -> None:
    doc = load_spec(spec("determinism:\n  clock: 2024-01-01T00:00:00Z\ntask2: x\n").replace("task2: x\n", "invariants:\n  a: {check: {type: file_exists, path: a}}\n"))
    assert doc.determinism.clock is not None and doc.determinism.clock.at.year == 2024
    issue = only_issue(spec("determinism:\n  clock: yesterday\ninvariants:\n  a: {check: {type: file_exists, path: a}}\n"))
    assert (issue.loc, issue.line) == ("determinism.clock", 7)


def test_merge_keys_and_anchors() -> None:
    doc = load_spec(
        spec(
            """\
            invariants:
              a: &base
                weight: 2
                check: {type: file_exists, path: a}
              b:
                <<: *base
                weight: 3
            """
        )
    )
    assert doc.invariants["b"].weight == 3 and doc.invariants["b"].check == doc.invariants["a"].check


def test_alias_bomb_is_refused() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    assert "document too large" in only_issue(bomb).msg


def test_validate_spec_data_without_lines() -> None:
    with pytest.raises(SpecValidationError) as info:
        validate_spec_data({"version": 1, "id": "x", "base": "localhost/a/b", "task": {"prompt": "p"}, "invariants": {"a": {"check": {"type": "nope"}}}})
    assert str(info.value) == (
        "spec invariants.a.check.type: unknown check type 'nope' (expected one of command_exit, file_exists, "
        "file_absent, file_content, sql, http_mock_assertions, custom, llm_as_judge, effects)"
    )
    assert info.value.details()["errors"][0]["line"] is None


def test_loader_is_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import subprocess

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the spec loader must not touch the network or spawn processes")

    monkeypatch.setattr(socket, "socket", boom)
    monkeypatch.setattr(subprocess, "Popen", boom)
    load_spec((EXAMPLES / "quickstart.yaml").read_text())
