"""Fuzzing stage: schemathesis drives every /v1 operation of GET /v1/openapi.json against a real
svcd (a subprocess in a temporary SERVICE_HOME, with its own valid key) and fails on any 5xx.

Operations that start containers (sandbox, run, replay, replica-suite and experiment-run creation)
are left out so the stage stays fast and needs no engine; everything else gets schema-valid and
schema-invalid (negative) examples, bounded per operation (SERVICE_FUZZ_EXAMPLES, default 80) so
the whole stage takes about a minute on 2 cores.

A second test drives the same operations with every response check schemathesis has that can pass
here (status code, content type, response schema and headers conformance, negative data
rejection, positive data acceptance, missing required header, unsupported method): the document
(daemon/openapi.py, generated from daemon/contract) promises exactly what the daemon does.
"""
from __future__ import annotations

import os

import pytest
import schemathesis  # the test extras install it: a missing fuzzer is an error, not a skip
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import (
    content_type_conformance,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from tests.support.fuzzing import fuzzed_svcd

EXAMPLES = int(os.environ.get("SERVICE_FUZZ_EXAMPLES") or 80)
# (method, path) of the operations that start containers: left out.
STARTS_CONTAINERS = {
    ("POST", "/v1/sandboxes"),
    ("POST", "/v1/runs"),
    ("POST", "/v1/runs/{run_id}/replay"),
    ("POST", "/v1/replicas"),
    ("POST", "/v1/experiments/{experiment_id}/run"),
}


@pytest.fixture(scope="module")
def fuzz_daemon():
    with fuzzed_svcd() as served:
        yield served


def _fuzzed(ctx) -> bool:
    operation = ctx.operation
    return operation.path.startswith("/v1/") and (operation.method.upper(), operation.path) not in STARTS_CONTAINERS


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_daemon):
    base, key, _ = fuzz_daemon
    schema = schemathesis.openapi.from_url(base + "/v1/openapi.json", timeout=10)
    # The key is configured, not drawn: generation then never counts a missing Authorization
    # header as the "invalid" part of a negative case.
    schema.config.update(headers={"Authorization": f"Bearer {key}"})
    return schema


# The filter goes on the lazy schema: one applied to the fixture's schema is not seen by parametrize.
schema = schemathesis.pytest.from_fixture("fuzz_schema").include(_fuzzed)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx(case, fuzz_daemon):
    base, key, home = fuzz_daemon
    headers = {"Authorization": f"Bearer {key}"}
    try:
        case.call_and_validate(base_url=base, headers=headers, checks=[not_a_server_error], timeout=15)
    except Exception:
        log = home / "logs" / "svcd.log"
        if log.exists():
            errors = [line for line in log.read_text().splitlines() if '"level": "error"' in line]
            print("\n".join(errors[-3:]))
        raise


# Conformance stage: the same operations, every response checked against the document (status code,
# media type, body schema, headers), schema-invalid requests must be rejected and schema-valid ones
# must not be refused as invalid. Fewer examples per operation: about a minute on 2 cores.
CONFORMANCE_EXAMPLES = int(os.environ.get("SERVICE_FUZZ_CONFORMANCE_EXAMPLES") or 25)
CONFORMANCE_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    missing_required_header,
    unsupported_method,
]
# Operations whose body carries a document validated beyond what a JSON Schema can say: a
# schema-valid body may still be refused (400) there, so positive data acceptance is not checked.
SEMANTIC_BODIES = {
    ("POST", "/v1/specs"): "`yaml` must be a valid spec document (daemon/spec)",
    ("POST", "/v1/agents"): "`bundle` must be a .tar.gz archive",
    ("POST", "/v1/traces"): "each event is any JSON value, checked one by one; numbers are 64-bit (the JSON decoder)",
    ("POST", "/v1/sandboxes/{sandbox_id}/trace"): "as POST /v1/traces",
    ("POST", "/v1/score-rules"): "the fields a rule needs depend on its `type`; `pattern` must compile; `judge_id` must name a judge",
}


@schema.parametrize()
@settings(max_examples=CONFORMANCE_EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
def test_operations_conform_to_the_document(case, fuzz_daemon):
    base, key, home = fuzz_daemon
    headers = {"Authorization": f"Bearer {key}"}
    key = (case.operation.method.upper(), case.operation.path)
    checks = [c for c in CONFORMANCE_CHECKS if not (c is positive_data_acceptance and key in SEMANTIC_BODIES)]
    case.call_and_validate(base_url=base, headers=headers, checks=checks, timeout=15)
