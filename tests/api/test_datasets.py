"""Datasets through the real API and store: versions, tags, upserts, diffs, limits, atomic refusal,
delete and tenant isolation."""
from __future__ import annotations

import json

import pytest

from daemon.contract.datasets import MAX_RECORD_BYTES
from tests.support.api import make_settings
from daemon.appkeys import STORE


@pytest.fixture
def settings(tmp_path):
    # the version-limit test makes 100 calls in a row
    return make_settings(tmp_path / "home", rate_limit_per_s=1000.0, rate_limit_burst=1000)


async def new_dataset(api, name: str = "qa") -> dict:
    response, body = await api.post("/v1/datasets", json={"name": name, "description": "questions"})
    assert response.status == 201, body
    return body


async def add(api, dataset_id: str, records: list, expect: int = 201) -> dict:
    response, body = await api.post(f"/v1/datasets/{dataset_id}/records", json=records)
    assert response.status == expect, body
    return body


async def records(api, dataset_id: str, query: str = "") -> list[dict]:
    response, body = await api.get(f"/v1/datasets/{dataset_id}/records{query}")
    assert response.status == 200, body
    return body["items"]


def sized_record(size: int) -> dict:
    """A record whose compact, key-sorted JSON encoding is exactly `size` bytes."""
    empty = len(json.dumps({"input": ""}, separators=(",", ":")).encode())
    return {"input": "x" * (size - empty)}


async def test_create_starts_at_version_one_with_no_records(api):
    dataset = await new_dataset(api)
    assert (dataset["id"].startswith("ds_"), dataset["version"], dataset["record_count"]) == (True, 1, 0)


async def test_each_call_adds_one_version_and_stamps_its_records(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": {"q": "a"}}, {"input": {"q": "b"}}])
    second = await add(api, dataset["id"], [{"input": {"q": "c"}, "expected": {"answer": "C"}}])
    items = await records(api, dataset["id"])
    assert (second["version"], [(r["input"]["q"], r["version"]) for r in items]) == (3, [("a", 2), ("b", 2), ("c", 3)])


async def test_earlier_versions_stay_readable(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": 1}])
    await add(api, dataset["id"], [{"input": 2}])
    assert [r["input"] for r in await records(api, dataset["id"], "?version=2")] == [1]


async def test_tags_match_any_of(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": 1, "tags": ["easy"]}, {"input": 2, "tags": ["hard"]}, {"input": 3, "tags": ["math"]}])
    assert [r["input"] for r in await records(api, dataset["id"], "?tags=easy,math")] == [1, 3]


async def test_records_page_in_insertion_order(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": i} for i in range(5)])
    response, first = await api.get(f"/v1/datasets/{dataset['id']}/records?limit=3")
    response, rest = await api.get(f"/v1/datasets/{dataset['id']}/records?limit=3&cursor={first['next_cursor']}")
    assert [r["input"] for r in first["items"] + rest["items"]] == [0, 1, 2, 3, 4]


async def test_a_key_upserts_in_a_new_version(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"key": "q1", "input": "old"}, {"key": "q2", "input": "other"}])
    result = await add(api, dataset["id"], [{"key": "q1", "input": "new"}])
    latest = {r["key"]: r["input"] for r in await records(api, dataset["id"])}
    assert (result["replaced"], latest) == (1, {"q1": "new", "q2": "other"})


async def test_an_upsert_leaves_the_older_version_as_it_was(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"key": "q1", "input": "old"}])
    await add(api, dataset["id"], [{"key": "q1", "input": "new"}])
    assert [r["input"] for r in await records(api, dataset["id"], "?version=2")] == ["old"]


async def test_diff_lists_added_and_modified(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"key": "q1", "input": "old"}, {"input": "kept"}])
    await add(api, dataset["id"], [{"key": "q1", "input": "new"}, {"input": "extra"}])
    response, diff = await api.get(f"/v1/datasets/{dataset['id']}/diff?from=2&to=3")
    assert response.status == 200, diff
    summary = ([r["input"] for r in diff["added"]], [(m["key"], m["before"]["input"], m["after"]["input"]) for m in diff["modified"]],
               diff["removed"])
    assert summary == (["extra"], [("q1", "old", "new")], [])


async def test_diff_backwards_lists_removed(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": "a"}])
    await add(api, dataset["id"], [{"input": "b"}])
    response, diff = await api.get(f"/v1/datasets/{dataset['id']}/diff?from=3&to=2")
    assert [r["input"] for r in diff["removed"]] == ["b"]


async def test_digest_is_per_version_and_content_addressed(api):
    one, two = await new_dataset(api, "one"), await new_dataset(api, "two")
    a = await add(api, one["id"], [{"input": {"q": 1}}])
    b = await add(api, two["id"], [{"input": {"q": 1}}])
    c = await add(api, two["id"], [{"input": {"q": 2}}])
    assert (a["digest"] == b["digest"], b["digest"] != c["digest"]) == (True, True)


async def test_a_record_of_exactly_64_kb_is_accepted(api):
    dataset = await new_dataset(api)
    assert (await add(api, dataset["id"], [sized_record(MAX_RECORD_BYTES)]))["added"] == 1


async def test_a_record_of_64_kb_plus_one_is_refused_naming_it(api):
    dataset = await new_dataset(api)
    response, body = await api.post(f"/v1/datasets/{dataset['id']}/records",
                                    json=[{"input": "fine"}, sized_record(MAX_RECORD_BYTES + 1)])
    assert (response.status, body["details"]["errors"][0]["loc"], body["details"]["limit_bytes"]) == (413, "records.1.input", 65536)


async def test_the_size_refusal_says_how_a_record_is_measured(api):
    dataset = await new_dataset(api)
    response, body = await api.post(f"/v1/datasets/{dataset['id']}/records", json=[sized_record(MAX_RECORD_BYTES + 1)])
    assert "65537 bytes, more than the limit of 65536 (64 KB); a record's size is its compact JSON" in body["message"], body


async def test_a_refused_call_adds_nothing(api):
    dataset = await new_dataset(api)
    await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": "fine"}, {"expected": "no input"}])
    response, body = await api.get(f"/v1/datasets/{dataset['id']}")
    assert (body["version"], body["record_count"]) == (1, 0)


async def test_a_missing_input_names_the_record_index(api):
    dataset = await new_dataset(api)
    response, body = await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": 1}, {"input": 2}, {"expected": 3}])
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "records.2.input")


async def test_a_wrong_type_names_the_field(api):
    dataset = await new_dataset(api)
    response, body = await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": 1, "tags": "easy"}])
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "records.0.tags")


async def test_the_10001st_record_is_refused(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": i} for i in range(10_000)])
    response, body = await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": "one more"}])
    assert (response.status, body["details"]["limit"]) == (409, 10_000)


async def test_an_upsert_at_10000_records_is_accepted(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": i, "key": f"k{i}"} for i in range(10_000)])
    assert (await add(api, dataset["id"], [{"input": "new", "key": "k0"}]))["record_count"] == 10_000


async def test_the_101st_version_is_refused(api):
    dataset = await new_dataset(api)
    for i in range(99):
        await add(api, dataset["id"], [{"input": i}])
    response, body = await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": "v101"}])
    assert (response.status, body["details"]["limit"]) == (409, 100)


async def test_delete_removes_the_dataset_and_its_records(api):
    dataset = await new_dataset(api)
    await add(api, dataset["id"], [{"input": 1}])
    response, _ = await api.delete(f"/v1/datasets/{dataset['id']}")
    rows = await api.app[STORE].fetchall("SELECT id FROM dataset_records WHERE dataset_id = ?", (dataset["id"],))
    assert (response.status, rows) == (204, [])


async def test_another_tenant_cannot_read_records(api, other_tenant_key):
    dataset = await new_dataset(api)
    response, _ = await api.get(f"/v1/datasets/{dataset['id']}/records", key=other_tenant_key)
    assert response.status == 403


async def test_another_tenant_cannot_add_records(api, other_tenant_key):
    dataset = await new_dataset(api)
    await api.post(f"/v1/datasets/{dataset['id']}/records", json=[{"input": 1}], key=other_tenant_key)
    response, body = await api.get(f"/v1/datasets/{dataset['id']}")
    assert body["version"] == 1


async def test_another_tenant_does_not_list_the_dataset(api, other_tenant_key):
    await new_dataset(api)
    response, body = await api.get("/v1/datasets", key=other_tenant_key)
    assert body["items"] == []


async def test_reading_a_version_past_the_latest_is_refused(api):
    dataset = await new_dataset(api)
    response, body = await api.get(f"/v1/datasets/{dataset['id']}/records?version=5")
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "query.version")


async def test_the_1001st_dataset_of_a_tenant_is_refused(api):
    for i in range(1000):
        await new_dataset(api, f"d{i}")
    response, body = await api.post("/v1/datasets", json={"name": "one too many"})
    assert (response.status, body["details"]["limit"]) == (409, 1000)
