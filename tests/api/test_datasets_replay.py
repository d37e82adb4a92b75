"""A dataset scenario's reproducer names its record (`matrix_entry.record_id`); a standalone run
naming a record the tenant does not have is refused before anything runs. (Replaying a record on
the real engine: tests/docker/test_dataset_replay.py.)"""
from __future__ import annotations

from tests.support.specs import PYTHON

SPEC = f"""\
version: 1
id: qa
base: {PYTHON}
task:
  prompt: "answer {{{{ question }}}}"
agent:
  type: cli
  binary: sh
invariants:
  wrote:
    check:
      type: file_exists
      path: answer.txt
"""


async def record_id(api, key: str | None = None) -> tuple[str, str]:
    response, dataset = await api.post("/v1/datasets", json={"name": "qa"}, key=key)
    assert response.status == 201, dataset
    response, added = await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": {"question": "q"}}], key=key)
    assert response.status == 201, added
    return dataset["id"], added["ids"][0]


async def run_naming(api, record: str):
    await api.upload_yaml(SPEC)
    return await api.post("/v1/runs", json={"spec_id": "qa", "matrix_entry": {"record_id": record}})


async def test_a_reproducer_naming_an_unknown_record_is_404(api):
    response, body = await run_naming(api, "rec_doesnotexist")
    assert (response.status, body["details"]["resource"]) == (404, "dataset record"), body


async def test_a_reproducer_naming_a_deleted_datasets_record_is_404(api):
    dataset_id, rec = await record_id(api)
    await api.delete(f"/v1/datasets/{dataset_id}")
    response, body = await run_naming(api, rec)
    assert response.status == 404, body


async def test_a_reproducer_naming_another_tenants_record_is_404(api, other_tenant_key):
    _, rec = await record_id(api, key=other_tenant_key)
    response, body = await run_naming(api, rec)
    assert response.status == 404, body
