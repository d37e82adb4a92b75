"""Fuzzing stage: schemathesis drives every /v1 operation of GET /v1/openapi.json against a real
svcd (a subprocess in a temporary SERVICE_HOME, with its own valid key) with every check it has
(`--checks all`: no 5xx; status code, media type, body schema and headers as documented; the Allow
header of a 405; schema-invalid (negative) requests refused; schema-valid ones accepted; a missing
required header or an unsupported method refused; the key not ignored).

A schema-valid request may still be refused with 400 only where the document says so: an
operation's `x-refuses-valid` (what the server checks beyond a JSON Schema: a spec's YAML, an agent's
bundle, a stored judge's id ...), or an integer beyond 64 bits in a JSON body (info.description and
the JsonValue components). Every other refusal of schema-valid data fails the test.

Operations that start containers (sandbox, run, replay, replica-suite and experiment-run creation)
are left out so the stage stays fast and needs no engine. Positive and negative examples, bounded per
operation (SERVICE_FUZZ_EXAMPLES, default 20): about a minute and a half on 2 cores.
"""
from __future__ import annotations

import os

import pytest
import schemathesis  # the test extras install it: a missing fuzzer is an error, not a skip
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import positive_data_acceptance

from tests.support.fuzzing import fuzzed_svcd, positive_data_accepted

EXAMPLES = int(os.environ.get("SERVICE_FUZZ_EXAMPLES") or 20)
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
@pytest.mark.timeout(900)  # one test item for every operation: the suite's 300 s per item is too short on a busy machine
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=list(HealthCheck))
def test_every_operation_does_what_the_document_says(case, fuzz_daemon):
    base, key, home = fuzz_daemon
    try:
        case.call_and_validate(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=15,
                               excluded_checks=[positive_data_acceptance], additional_checks=[positive_data_accepted])
    except Exception:
        log = home / "logs" / "svcd.log"
        if log.exists():
            errors = [line for line in log.read_text().splitlines() if '"level": "error"' in line]
            print("\n".join(errors[-3:]))
        raise
