"""GET /v1/datasets/{id}/versions through the real API and store: every version, newest first, with
its record count (what the TUI's launch screen offers to pick from)."""
from __future__ import annotations


async def dataset_with_versions(api, key: str | None = None) -> str:
    response, dataset = await api.post("/v1/datasets", json={"name": "qa"}, key=key)
    assert response.status == 201, dataset
    for batch in ([{"input": 1}], [{"input": 2}, {"input": 3}]):
        response, body = await api.post(f"/v1/datasets/{dataset['id']}/records", json=batch, key=key)
        assert response.status == 201, body
    return dataset["id"]


async def test_versions_are_listed_newest_first_with_their_record_counts(api):
    dataset_id = await dataset_with_versions(api)
    response, page = await api.get(f"/v1/datasets/{dataset_id}/versions")
    assert [(v["version"], v["record_count"]) for v in page["items"]] == [(3, 3), (2, 1), (1, 0)], page


async def test_versions_page_with_a_cursor(api):
    dataset_id = await dataset_with_versions(api)
    _, first = await api.get(f"/v1/datasets/{dataset_id}/versions?limit=2")
    _, rest = await api.get(f"/v1/datasets/{dataset_id}/versions?limit=2&cursor={first['next_cursor']}")
    assert [v["version"] for v in rest["items"]] == [1]


async def test_another_tenants_versions_are_forbidden(api, other_tenant_key):
    dataset_id = await dataset_with_versions(api, key=other_tenant_key)
    response, body = await api.get(f"/v1/datasets/{dataset_id}/versions")
    assert response.status == 403, body  # as for every other read of a dataset (owned_by_path)
