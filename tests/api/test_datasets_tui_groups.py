"""The TUI experiment view of an experiment over a dataset (real daemon on a Unix socket whose
scenario runner is tests.support.dataset_runner, real client, Textual Pilot): the scenarios are
grouped by record, each record's row first with its verdict over its scenarios."""
from __future__ import annotations

import shutil

import pytest

from daemon.app import create_app
from daemon.appkeys import RUN_SCENARIO
from tests.support.dataset_runner import DatasetRunner, spec_yaml
from tests.support.homes import short_home
from tests.support.tui import Daemon, eventually, make_app, wait_for

RECORDS = [
    {"input": {"question": "2+2", "answer": "4"}, "expected": {"answer": "4"}},
    {"input": {"question": "3*3", "answer": "6"}, "expected": {"answer": "9"}},  # deliberately wrong
    {"input": {"question": "1+1", "answer": "2"}, "expected": {"answer": "2"}},
]


class DatasetDaemon(Daemon):
    """The real daemon app with the dataset scenario runner in place of the sandbox runner."""

    async def start(self) -> None:
        from aiohttp import web

        self.app = create_app(self.settings)
        self.app[RUN_SCENARIO] = DatasetRunner()
        self.runner = web.AppRunner(self.app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self.runner.setup()
        await web.UnixSite(self.runner, str(self.socket_path)).start()


@pytest.fixture
async def finished(tmp_path):
    """(daemon, experiment id, record ids in order) of a finished experiment over RECORDS."""
    short = short_home("svcdg")
    daemon = DatasetDaemon(tmp_path / "home", short / "s.sock")
    await daemon.start()
    client = daemon.client()
    try:
        dataset = await client.post("/v1/datasets", {"name": "qa"})
        added = await client.post(f"/v1/datasets/{dataset['id']}/records", RECORDS)
        await client.post("/v1/specs", {"name": "qa", "yaml": spec_yaml(dataset["id"])})
        created = await client.post("/v1/experiments", {"spec_id": "qa"})
        await client.post(f"/v1/experiments/{created['id']}/run", {})

        async def done():
            body = await client.get(f"/v1/experiments/{created['id']}")
            return body["status"] in ("completed", "failed")
        assert await eventually(done, timeout=20), "the experiment did not finish"
        yield daemon, created["id"], added["ids"]
    finally:
        await client.close()
        await daemon.stop()
        shutil.rmtree(short, ignore_errors=True)


async def table_keys(daemon, experiment_id: str, size=(120, 40)) -> tuple[list[str], list[str]]:
    """(row keys, verdict cells of the record rows) of the experiment view's scenario table."""
    from tui.screens.experiment import ExperimentScreen

    app = make_app(daemon)
    async with app.run_test(size=size) as pilot:
        await app.push_screen(ExperimentScreen(experiment_id))
        table = app.screen.query_one("#scenarios")
        await wait_for(pilot, lambda: table.row_count == 9, timeout=20, what="3 record rows and 6 scenario rows")
        keys = table.keys
        verdicts = [str(table.get_row(k)[0]) for k in keys if k.startswith("record:")]
    return keys, verdicts


def kinds(keys: list[str]) -> list[str]:
    return [k if k.startswith("record:") else "scenario" for k in keys]


async def test_each_record_row_leads_its_scenarios(finished):
    daemon, experiment_id, record_ids = finished
    keys, _ = await table_keys(daemon, experiment_id)
    assert kinds(keys) == [f"record:{record_ids[0]}", "scenario", "scenario",
                           f"record:{record_ids[1]}", "scenario", "scenario",
                           f"record:{record_ids[2]}", "scenario", "scenario"]


async def test_the_wrong_records_row_says_fail(finished):
    daemon, experiment_id, _ = finished
    _, verdicts = await table_keys(daemon, experiment_id)
    assert verdicts == ["pass", "fail", "pass"]
