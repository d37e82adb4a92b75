"""The TUI launch screen over a dataset spec (real daemon on a Unix socket, real client, Textual
Pilot): it offers the dataset's versions to pick from, and the experiment it starts runs over the
version picked."""
from __future__ import annotations

import pytest

from tests.support.images import PYTHON
from tests.support.tui import make_app, served_daemon, screen_text, wait_for


@pytest.fixture
async def daemon(tmp_path):
    async with served_daemon(tmp_path / "home", "svcds") as d:
        yield d


async def dataset_with_two_versions(client) -> str:
    dataset = await client.post("/v1/datasets", {"name": "qa"})
    await client.post(f"/v1/datasets/{dataset['id']}/records", [{"input": {"q": "a"}}])
    await client.post(f"/v1/datasets/{dataset['id']}/records", [{"input": {"q": "b"}}])
    return dataset["id"]


def spec_file(tmp_path, dataset_id: str):
    path = tmp_path / "qa.yaml"
    path.write_text(f"""\
version: 1
id: qa
base: {PYTHON}
task:
  prompt: "{{{{ q }}}}"
agent:
  type: cli
  binary: sh
invariants:
  wrote:
    check:
      type: file_exists
      path: x
parallelism:
  dataset:
    id: {dataset_id}
""")
    return path


async def test_the_launch_screen_runs_over_the_dataset_version_picked(daemon, tmp_path):
    from tui.screens.launch import LaunchScreen

    client = daemon.client()
    try:
        dataset_id = await dataset_with_two_versions(client)
        spec_file(tmp_path, dataset_id)
        app = make_app(daemon)
        async with app.run_test(size=(120, 36)) as pilot:
            await app.push_screen(LaunchScreen(root=tmp_path))
            launch = app.screen
            await wait_for(pilot, lambda: "qa.yaml" in screen_text(app), what="the spec in the file list")
            await pilot.press("enter")
            await wait_for(pilot, lambda: launch.validated, timeout=30, what="offline validation")
            await wait_for(pilot, lambda: launch.dataset_versions, timeout=10, what="the dataset's versions")
            launch.query_one("#dataset-version").value = 2
            await pilot.press("ctrl+s", "y")  # start, confirmed
            await wait_for(pilot, lambda: type(app.screen).__name__ == "ExperimentScreen", timeout=30, what="the experiment view")
        page = await client.get("/v1/experiments", params={"spec_id": "qa"})
        results = await client.get(f"/v1/experiments/{page['items'][0]['id']}")
        await client.post(f"/v1/experiments/{results['id']}/cancel", {})
        assert results["dataset"]["version"] == 2
    finally:
        await client.close()


async def test_the_launch_screen_offers_every_version_and_presets_the_latest(daemon, tmp_path):
    from tui.screens.launch import LaunchScreen

    client = daemon.client()
    try:
        dataset_id = await dataset_with_two_versions(client)
        spec_file(tmp_path, dataset_id)
        app = make_app(daemon)
        async with app.run_test(size=(120, 36)) as pilot:
            await app.push_screen(LaunchScreen(root=tmp_path))
            launch = app.screen
            await wait_for(pilot, lambda: "qa.yaml" in screen_text(app), what="the spec in the file list")
            await pilot.press("enter")
            await wait_for(pilot, lambda: launch.dataset_versions, timeout=10, what="the dataset's versions")
            offered = (launch.dataset_versions, launch.query_one("#dataset-version").value)
        assert offered == ([3, 2, 1], 3)
    finally:
        await client.close()
