"""`svc datasets ...` through the real CLI against the in-process daemon (over TCP): create, add,
records, diff, JSONL import and export, bad lines named by file line, from-failures."""
from __future__ import annotations

import json

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.cli import svc_in_thread
from tests.support.dataset_runner import DatasetRunner
from tests.support.experiments import wait_done
from tests.support.specs import PYTHON
from daemon.appkeys import RUN_SCENARIO


@pytest.fixture
async def api(aiohttp_client, tmp_path):
    app = create_app(make_settings(tmp_path / "home"))
    app[RUN_SCENARIO] = DatasetRunner()
    return await api_on(aiohttp_client, app)


def jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


RECORDS = [{"input": {"q": "a"}, "expected": {"answer": "A"}, "tags": ["x"]}, {"input": {"q": "b"}, "key": "kb"}]


async def test_import_then_export_gives_back_the_records(api, tmp_path):
    code, out, err = await svc_in_thread(api, "datasets", "import", "qa", jsonl(tmp_path / "qa.jsonl", RECORDS))
    dataset_id = json.loads(out)["dataset"]["id"]
    code, out, err = await svc_in_thread(api, "datasets", "export", dataset_id)
    assert (code, [json.loads(line) for line in out.splitlines()]) == (0, RECORDS)


async def test_add_creates_a_new_version(api, tmp_path):
    code, out, _ = await svc_in_thread(api, "datasets", "create", "qa")
    dataset_id = json.loads(out)["id"]
    code, out, err = await svc_in_thread(api, "datasets", "add", dataset_id, jsonl(tmp_path / "a.jsonl", RECORDS))
    assert (code, json.loads(out)["version"]) == (0, 2), err


async def test_records_of_an_older_version(api, tmp_path):
    code, out, _ = await svc_in_thread(api, "datasets", "import", "qa", jsonl(tmp_path / "qa.jsonl", RECORDS))
    dataset_id = json.loads(out)["dataset"]["id"]
    await svc_in_thread(api, "datasets", "add", dataset_id, jsonl(tmp_path / "more.jsonl", [{"input": "c"}]))
    code, out, _ = await svc_in_thread(api, "datasets", "records", dataset_id, "--version", "2")
    assert [r["input"] for r in json.loads(out)] == [{"q": "a"}, {"q": "b"}]


async def test_export_of_a_pinned_version(api, tmp_path):
    code, out, _ = await svc_in_thread(api, "datasets", "import", "qa", jsonl(tmp_path / "qa.jsonl", RECORDS))
    dataset_id = json.loads(out)["dataset"]["id"]
    await svc_in_thread(api, "datasets", "add", dataset_id, jsonl(tmp_path / "more.jsonl", [{"input": "c"}]))
    code, out, _ = await svc_in_thread(api, "datasets", "export", dataset_id, "--version", "2")
    assert len(out.splitlines()) == 2


async def test_diff_shows_the_modified_key(api, tmp_path):
    code, out, _ = await svc_in_thread(api, "datasets", "import", "qa", jsonl(tmp_path / "qa.jsonl", RECORDS))
    dataset_id = json.loads(out)["dataset"]["id"]
    await svc_in_thread(api, "datasets", "add", dataset_id, jsonl(tmp_path / "b.jsonl", [{"input": {"q": "B"}, "key": "kb"}]))
    code, out, _ = await svc_in_thread(api, "datasets", "diff", dataset_id, "--from", "2")
    assert [m["key"] for m in json.loads(out)["modified"]] == ["kb"]


async def test_a_bad_record_names_its_file_line(api, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": 1}\n\n{"expected": 2}\n')
    code, out, err = await svc_in_thread(api, "datasets", "import", "qa", str(path))
    assert (code, "line 3 records.1.input" in err) == (1, True), err


async def test_a_refused_import_leaves_no_dataset(api, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"expected": 2}\n')
    await svc_in_thread(api, "datasets", "import", "qa", str(path))
    code, out, _ = await svc_in_thread(api, "datasets", "list")
    assert json.loads(out)["items"] == []


async def test_a_line_that_is_not_json_is_named(api, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": 1}\nnot json\n')
    code, out, err = await svc_in_thread(api, "datasets", "import", "qa", str(path))
    assert (code, f"{path}:2: not JSON" in err) == (1, True), err


async def test_delete_then_get_fails(api, tmp_path):
    code, out, _ = await svc_in_thread(api, "datasets", "create", "qa")
    dataset_id = json.loads(out)["id"]
    await svc_in_thread(api, "datasets", "delete", dataset_id)
    code, out, err = await svc_in_thread(api, "datasets", "get", dataset_id)
    assert (code, "404" in err) == (1, True)


async def test_from_failures_turns_failing_scenarios_into_records(api, tmp_path):
    records = [{"input": {"answer": "4"}, "expected": {"answer": "4"}}, {"input": {"answer": "6"}, "expected": {"answer": "9"}}]
    code, out, _ = await svc_in_thread(api, "datasets", "import", "qa", jsonl(tmp_path / "qa.jsonl", records))
    dataset_id = json.loads(out)["dataset"]["id"]
    await api.upload_yaml(f"""\
version: 1
id: qa
base: {PYTHON}
task: {{prompt: go}}
invariants: {{ok: {{check: {{type: file_exists, path: x}}}}}}
parallelism: {{dataset: {{id: {dataset_id}}}}}
""")
    response, created = await api.post("/v1/experiments", json={"spec_id": "qa"})
    await api.post(f"/v1/experiments/{created['id']}/run")
    await wait_done(api, created["id"])
    code, out, err = await svc_in_thread(api, "datasets", "from-failures", created["id"])
    code, out, _ = await svc_in_thread(api, "datasets", "export", json.loads(out)["dataset_id"])
    assert [(r["input"], r["expected"]) for r in map(json.loads, out.splitlines())] == [({"answer": "6"}, {"answer": "9"})]


async def test_versions_lists_every_version_newest_first(api, tmp_path):
    code, out, _ = await svc_in_thread(api, "datasets", "import", "qa", jsonl(tmp_path / "qa.jsonl", RECORDS))
    dataset_id = json.loads(out)["dataset"]["id"]
    await svc_in_thread(api, "datasets", "add", dataset_id, jsonl(tmp_path / "b.jsonl", [{"input": {"q": "B"}, "key": "kb"}]))
    code, out, _ = await svc_in_thread(api, "datasets", "versions", dataset_id)
    assert [(v["version"], v["record_count"]) for v in json.loads(out)] == [(3, 2), (2, 2), (1, 0)]
