"""A request aiohttp cannot parse is answered before any middleware runs; svcd still answers it with
the JSON error body the document promises (schemathesis found a text/plain 400 for a long query)."""
from __future__ import annotations

import pytest
import requests

from tests.support.fuzzing import fuzzed_svcd


@pytest.fixture(scope="module")
def daemon():
    with fuzzed_svcd() as served:
        yield served


def test_a_request_line_over_the_limit_is_a_json_400(daemon):
    base, key, _home = daemon
    response = requests.get(base + "/v1/datasets", params={"tags": "x" * 9000}, headers={"Authorization": f"Bearer {key}"},
                            timeout=15)
    assert (response.status_code, response.headers["Content-Type"].split(";")[0], response.json()["error"]) == (
        400, "application/json", "invalid_request")


def test_the_answer_does_not_echo_the_request(daemon):
    base, key, _home = daemon
    response = requests.get(base + "/v1/runs/run_x/trajectory", params={"sig": "s3cr3t" * 1500}, timeout=15)
    assert "s3cr3t" not in response.text


def test_the_log_does_not_quote_the_request(daemon):
    base, key, home = daemon
    requests.get(base + "/v1/runs/run_x/trajectory", params={"sig": "l0gged" * 1500}, timeout=15)
    logged = "".join(path.read_text(errors="replace") for path in home.rglob("*") if path.is_file() and path.suffix in (".log", ".txt"))
    assert "l0gged" not in logged
