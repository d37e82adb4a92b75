"""Finding 5: a spec could ask for anything (64t of memory, 100t of disk, 10^8 pids, 512 cpus, a
365-day timeout, a 300-day agent). The operator's caps (SERVICE_MAX_MEMORY, _DISK, _PIDS, _CPUS,
_TIMEOUT) refuse such a spec with a 400 in the spec-error body naming the field, the value asked
and the cap; a spec stored before a cap was lowered is refused when it is used."""
from __future__ import annotations

import pytest

from daemon.app import create_app
from daemon.appkeys import SETTINGS
from daemon.config import Settings
from tests.support.api import api_on, make_settings
from tests.support.specs import SPEC_YAML


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    # caps given explicitly, so the test does not depend on this machine's cpu count
    return await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", max_cpus=4.0)))


def with_resources(block: str, agent_timeout: str | None = None) -> str:
    text = SPEC_YAML.replace("id: hello", "id: greedy")
    if agent_timeout is not None:
        text = text.replace("  binary: sh\n", f"  binary: sh\n  timeout: {agent_timeout}\n")
    return text + block


@pytest.mark.parametrize("field, block, asked, cap", [
    ("resources.memory", "resources:\n  memory: 64t\n", "64t", "16g"),
    ("resources.disk", "resources:\n  disk: 100t\n", "100t", "50g"),
    ("resources.pids", "resources:\n  pids: 100000000\n", "100000000", "4096"),
    ("resources.cpus", "resources:\n  cpus: 512\n", "512", "4"),
    ("resources.timeout", "resources:\n  timeout: 365d\n", "365d", "1d"),
])
async def test_a_spec_over_a_resource_cap_is_refused_naming_field_value_and_cap(api, field, block, asked, cap):
    response, body = await api.post("/v1/specs", json={"name": "greedy", "yaml": with_resources(block)})
    assert (response.status, body["error"], [(e["loc"], asked in e["msg"], cap in e["msg"]) for e in body["details"]["errors"]]) \
        == (400, "invalid_request", [(field, True, True)])


async def test_an_agent_timeout_over_the_cap_is_refused(api):
    response, body = await api.post("/v1/specs", json={"name": "greedy", "yaml": with_resources("", agent_timeout="300d")})
    assert (response.status, [(e["loc"], "300d" in e["msg"], "1d" in e["msg"]) for e in body["details"]["errors"]]) \
        == (400, [("agent.timeout", True, True)])


async def test_a_raw_yaml_upload_over_a_cap_is_refused_too(api):
    response, body = await api.post("/v1/specs", data=with_resources("resources:\n  memory: 64t\n").encode(),
                                    headers={"Content-Type": "application/x-yaml"})
    assert (response.status, [e["loc"] for e in body["details"]["errors"]]) == (400, ["resources.memory"])


async def test_the_refusal_carries_the_line_of_the_field(api):
    text = with_resources("resources:\n  memory: 64t\n")
    line = text.splitlines().index("  memory: 64t") + 1
    response, body = await api.post("/v1/specs", json={"name": "greedy", "yaml": text})
    assert body["details"]["errors"][0]["line"] == line


async def test_nothing_is_stored_for_a_refused_spec(api):
    await api.post("/v1/specs", json={"name": "greedy", "yaml": with_resources("resources:\n  memory: 64t\n")})
    response, body = await api.get("/v1/specs/greedy")
    assert response.status == 404


async def test_a_spec_within_the_caps_is_accepted(api):
    response, body = await api.post("/v1/specs", json={"name": "modest", "yaml": with_resources(
        "resources:\n  memory: 2g\n  disk: 10g\n  pids: 512\n  cpus: 2\n  timeout: 2h\n", agent_timeout="1h")})
    assert response.status == 201, body


async def test_a_stored_spec_over_a_lowered_cap_is_refused_when_an_experiment_uses_it(api):
    response, body = await api.post("/v1/specs", json={"name": "greedy", "yaml": with_resources("resources:\n  memory: 8g\n")})
    assert response.status == 201, body
    api.app[SETTINGS].max_memory = 4 * 1024**3  # the operator lowered SERVICE_MAX_MEMORY and restarted
    response, body = await api.post("/v1/experiments", json={"spec_id": "greedy"})
    assert (response.status, [e["loc"] for e in body["details"]["errors"]]) == (400, ["resources.memory"])


async def test_a_stored_spec_over_a_lowered_cap_is_refused_when_a_run_uses_it(api):
    response, body = await api.post("/v1/specs", json={"name": "greedy", "yaml": with_resources("resources:\n  pids: 1000\n")})
    assert response.status == 201, body
    api.app[SETTINGS].max_pids = 100
    response, body = await api.post("/v1/runs", json={"spec_id": "greedy"})
    assert (response.status, [e["loc"] for e in body["details"]["errors"]]) == (400, ["resources.pids"])


def test_the_caps_are_read_from_the_environment(monkeypatch):
    for name, value in (("SERVICE_MAX_MEMORY", "2g"), ("SERVICE_MAX_DISK", "3g"), ("SERVICE_MAX_PIDS", "99"),
                        ("SERVICE_MAX_CPUS", "1.5"), ("SERVICE_MAX_TIMEOUT", "2h")):
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert (settings.max_memory, settings.max_disk, settings.max_pids, settings.max_cpus, settings.max_timeout_s) \
        == (2 * 1024**3, 3 * 1024**3, 99, 1.5, 7200.0)
