"""The typed contract: answers are validated against their declared models, the OpenAPI document is
generated from exactly those models, and a literal path answers only its own methods."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from aiohttp import web

from daemon.contract.common import Response
from daemon.http import ResponseContractError, Routes, render

ROOT = Path(__file__).resolve().parents[2]


class Thing(Response):
    id: str
    size: int


def _info(**options):
    routes = Routes("test")

    @routes.get("/v1/things/{thing_id}", "a thing", response=Thing, **options)
    async def get_thing(request: web.Request):
        return {}

    return routes.items[0]


def test_an_answer_is_validated_against_its_model_and_keeps_exactly_its_keys():
    info = _info()
    response = render(info, {"id": "t1", "size": 3})
    assert response.status == 200 and response.text == '{"id":"t1","size":3}'
    with pytest.raises(ResponseContractError) as err:
        render(info, {"id": "t1", "size": 3, "undeclared": True})  # never dropped silently
    assert err.value.details["errors"][0]["loc"] == "response.undeclared"
    with pytest.raises(ResponseContractError):
        render(info, {"id": "t1"})  # a declared field missing
    page = render(_info(paginated=True), {"items": [{"id": "t1", "size": 1}], "next_cursor": None, "count": 1})
    assert page.status == 200


def test_the_contract_package_imports_only_pydantic_and_the_standard_library():
    for path in (ROOT / "daemon" / "contract").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert top in ("pydantic", "__future__", "typing", "re", "shlex", "datetime") or name.startswith("daemon.contract"), \
                    f"{path.name} imports {name}"


async def test_openapi_lists_every_status_and_forbids_extra_request_keys(api):
    response, doc = await api.get("/v1/openapi.json")
    assert response.status == 200
    create = doc["paths"]["/v1/webhooks"]["post"]
    assert {"201", "400", "401", "403", "409", "413", "415", "429"} <= set(create["responses"])
    body = create["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert doc["components"]["schemas"][body]["additionalProperties"] is False
    runs = doc["paths"]["/v1/runs"]["post"]["responses"]
    assert {"202", "400", "404", "409", "503"} <= set(runs)
    events = doc["paths"]["/v1/sandboxes/{sandbox_id}/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert events["x-item-schema"]["$ref"].endswith("/SandboxEvent")
    suite = doc["components"]["schemas"]["ReplicaSuite"]
    assert len(suite["properties"]) == 22 and suite["additionalProperties"] is False


async def test_a_literal_path_answers_405_with_its_own_allow_header(api):
    response, body = await api.get("/v1/experiments/compare")
    assert response.status == 405 and response.headers["Allow"] == "POST"
    assert body["error"] == "method_not_allowed"
    response, body = await api.post("/v1/experiments/compare", json={"baseline_id": "exp_a", "candidate_id": "exp_b"})
    assert response.status == 404  # still the compare route
