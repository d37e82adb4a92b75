"""The JSON Schema of spec files (`svc spec schema`, `GET /v1/spec-schema`, `svc setup spec`), checked with a
standard validator (jsonschema, Draft 2020-12): every example spec and every whole spec in the docs validates,
a spec the loader refuses for a wrong type is refused by the schema too, and the CLI prints the daemon's document."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from client.setup.phases import SCHEMA_FILE, SCHEMA_LINE, Options, plan_spec
from daemon.app import create_app
from daemon.spec import SpecValidationError, load_spec
from daemon.spec.schema import spec_json_schema, spec_json_schema_text
from tests.support.api import api_on, make_settings
from tests.support.cli import svc_in_thread

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
BROKEN = {"broken.yaml"}  # examples that show validation errors


def validator() -> jsonschema.Validator:
    schema = spec_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def schema_errors(data: object) -> list[str]:
    return [f"{e.json_path}: {e.message[:300]}" for e in validator().iter_errors(data)]


def docs_specs() -> list[tuple[str, str]]:
    """Whole specs written in the docs and the README: a ```yaml block, or a heredoc in a ```sh block,
    with top-level `version:` and `invariants:`."""
    found = []
    for page in sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]):
        text = page.read_text(encoding="utf-8")
        blocks = [m for m in re.finditer(r"```ya?ml[^\n]*\n(.*?)```", text, re.S)]
        blocks += [m for m in re.finditer(r"<<-?\s*'?(\w+)'?\n(.*?)\n\1\n", text, re.S)]
        for m in blocks:
            body = m.group(m.lastindex or 1)
            if re.search(r"^version:", body, re.M) and re.search(r"^invariants:", body, re.M):
                found.append((f"{page.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", body))
    return found


def test_the_schema_is_a_valid_draft_2020_12_document():
    schema = json.loads(spec_json_schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert {"version", "id", "base", "task", "invariants"} <= set(schema["required"])
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_spec_agrees_with_the_loader(path):
    text = path.read_text(encoding="utf-8")
    errors = schema_errors(yaml.safe_load(text))
    if path.name in BROKEN:
        with pytest.raises(SpecValidationError):
            load_spec(text, path.name)
        assert errors, f"{path.name} is refused by the loader but valid under the schema"
    else:
        load_spec(text, path.name)
        assert errors == [], f"{path.name}: {errors}"


def test_every_whole_spec_in_the_docs_validates():
    specs = docs_specs()
    assert len(specs) >= 2, "the docs' specs were not found"
    for where, text in specs:
        load_spec(text, where)
        assert schema_errors(yaml.safe_load(text)) == [], where


def test_a_type_error_the_loader_refuses_the_schema_refuses():
    text = (ROOT / "examples" / "quickstart.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    data["parallelism"] = {**(data.get("parallelism") or {}), "replicas": "many"}
    bad = yaml.safe_dump(data, sort_keys=False)
    with pytest.raises(SpecValidationError) as refused:
        load_spec(bad, "bad.yaml")
    assert "parallelism.replicas" in str(refused.value)
    errors = schema_errors(data)
    assert errors and all("replicas" in e for e in errors), errors


def test_setup_spec_writes_the_schema_and_names_it_in_the_first_line(tmp_path):
    project = tmp_path / "my-agent"
    project.mkdir()
    result = plan_spec(Options(project=project, home=tmp_path, agents=("claude",)))
    for change in result.changes:
        change.apply()
    spec = (project / "svc.yaml").read_text()
    assert spec.splitlines()[0] == SCHEMA_LINE == f"# yaml-language-server: $schema={SCHEMA_FILE}"
    schema_path = project / SCHEMA_FILE  # relative to the spec file, as the YAML language server reads it
    assert json.loads(schema_path.read_text()) == spec_json_schema()
    assert any("JSON Schema" in c.diff() for c in result.changes)  # a short line, not 1000s of diff lines
    jsonschema.Draft202012Validator(json.loads(schema_path.read_text())).validate(yaml.safe_load(spec))
    assert plan_spec(Options(project=project, home=tmp_path, agents=("claude",))).changes == []  # idempotent


async def test_svc_spec_schema_prints_the_daemons_document(aiohttp_client, tmp_path):
    api = await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home")))
    response, served = await api.get("/v1/spec-schema")
    assert response.status == 200, served
    code, out, err = await svc_in_thread(api, "spec", "schema")
    assert code == 0, err
    assert json.loads(out) == served == spec_json_schema()
    code, _, err = await svc_in_thread(api, "spec", "schema", "-o", str(tmp_path / "spec.schema.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "spec.schema.json").read_text()) == served
    anonymous = await api.client.get("/v1/spec-schema")
    assert anonymous.status == 401  # a read route like the others
