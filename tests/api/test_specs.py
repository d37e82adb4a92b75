"""Specs API: shapes A and B, versions, validation errors with lines, ids."""
from __future__ import annotations

from tests.api.conftest import SPEC_YAML

YAML = {"Content-Type": "application/x-yaml"}


async def test_upload_shape_a_and_b_and_versions(api):
    response, first = await api.post("/v1/specs", json={"name": "hello", "yaml": SPEC_YAML})
    assert response.status == 201
    assert first["id"] == "hello" and first["version"] == 1 and first["yaml"] == SPEC_YAML
    changed = SPEC_YAML.replace("write hello.txt", "write hello.txt now")
    response, second = await api.post("/v1/specs", data=changed, headers=YAML)
    assert response.status == 201 and second["version"] == 2
    response, latest = await api.get("/v1/specs/hello")
    assert latest["version"] == 2 and "now" in latest["yaml"]
    response, old = await api.get("/v1/specs/hello", params={"version": "1"})
    assert old["version"] == 1 and old["yaml"] == SPEC_YAML
    response, versions = await api.get("/v1/specs/hello/versions")
    assert [v["version"] for v in versions["items"]] == [2, 1]
    response, body = await api.get("/v1/specs/hello", params={"version": "9"})
    assert response.status == 404 and "no version 9" in body["message"]


async def test_same_yaml_again_does_not_add_a_version(api):
    await api.post("/v1/specs", data=SPEC_YAML, headers=YAML)
    response, again = await api.post("/v1/specs", data=SPEC_YAML, headers=YAML)
    assert response.status == 200 and again["version"] == 1


async def test_invalid_spec_names_line_and_path(api):
    bad = SPEC_YAML.replace("type: file_exists", "type: comand_exit")
    response, body = await api.post("/v1/specs", json={"name": "bad", "yaml": bad})
    assert response.status == 400 and body["error"] == "invalid_request"
    issue = body["details"]["errors"][0]
    assert issue["loc"] == "invariants.wrote.check.type"
    assert issue["line"] == 12
    assert "comand_exit" in issue["msg"]


async def test_invalid_yaml_syntax_has_a_line(api):
    response, body = await api.post("/v1/specs", data="id: x\n  bad: [unclosed\n", headers=YAML)
    assert response.status == 400
    assert body["details"]["errors"][0]["line"] >= 1


async def test_wrong_content_type_is_415(api):
    response, body = await api.post("/v1/specs", data=SPEC_YAML, headers={"Content-Type": "text/plain"})
    assert response.status == 415 and body["error"] == "unsupported_media_type"


async def test_list_filter_delete_and_path_like_ids(api):
    await api.post("/v1/specs", json={"name": "one", "yaml": SPEC_YAML})
    await api.post("/v1/specs", json={"name": "two", "yaml": SPEC_YAML.replace("id: hello", "id: other")})
    response, listing = await api.get("/v1/specs")
    assert {s["id"] for s in listing["items"]} == {"hello", "other"}
    response, listing = await api.get("/v1/specs", params={"name": "two"})
    assert [s["id"] for s in listing["items"]] == ["other"]
    response, body = await api.get("/v1/specs/..%2F..%2Fetc")
    assert response.status in (400, 404) and body["error"] in ("invalid_request", "not_found")
    response, body = await api.get("/v1/specs/a..b")
    assert response.status == 400
    response, _ = await api.delete("/v1/specs/hello")
    assert response.status == 204
    response, body = await api.get("/v1/specs/hello")
    assert response.status == 404 and body["details"] == {"resource": "spec", "id": "hello"}
