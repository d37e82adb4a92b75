"""Effect differences through every surface, driven by real experiments on real containers: a baseline
agent writes 3 rows to `orders`, a candidate none, and a flaky agent writes one row in the replicas
whose seed is odd (an experiment seed is chosen so its two replicas split). `svc eval compare` names
the baseline's write with the rows' keys in its Markdown and HTML reports; the TUI's compare screen
lists it and the run view's Effects tab shows the keys (Textual's pilot against the same daemon);
comparing with the flaky experiment names the replicas that differ."""
from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from client.config import ClientConfig
from daemon.experiments.seeds import derive_seed
from tests.support.cli import svc_in_thread
from tests.support.runs import cli_spec, inv, upload
from tests.support.tui import screen_text, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

PSQL = 'psql -X -q -v ON_ERROR_STOP=1 "$SERVICE_SERVICE_DB_URL"'
FIXTURES = [{"service": "db", "sql": "CREATE TABLE orders (id int PRIMARY KEY, status text)"}]
THREE = f"{PSQL} -c \"INSERT INTO orders VALUES (3, 'new'), (4, 'new'), (5, 'new')\""
FLAKY = f"case \"$SERVICE_SEED\" in *[13579bdf]) {PSQL} -c \"INSERT INTO orders VALUES (7, 'odd')\" ;; esac; true"
WROTE = "baseline inserted 3 rows into orders, id=3,4,5 (candidate none)"


def spec(spec_id: str, script: str) -> dict:
    return cli_spec(spec_id, script, {"ran": inv({"type": "command_exit", "command": "true"})},
                    services=[{"name": "db", "type": "postgres"}], fixtures=FIXTURES, audit={"db_writes": True})


def split_seed() -> str:
    """An experiment seed whose replica 0 gets an odd seed (writes) and replica 1 an even one."""
    for i in range(10_000):
        base = f"flaky-{i}"
        first, second = derive_seed(base, 0, 0), derive_seed(base, 0, 1)
        if int(first[-1], 16) % 2 == 1 and int(second[-1], 16) % 2 == 0:
            return base
    raise AssertionError("no seed splits the replicas")


async def experiment(api, spec_id: str, **body) -> dict:
    response, created = await api.post("/v1/experiments", json={"spec_id": spec_id, "replicas": 2, **body})
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started
    deadline = asyncio.get_running_loop().time() + 400
    while True:
        _, got = await api.get(f"/v1/experiments/{created['id']}")
        if got["status"] in ("completed", "failed", "cancelled"):
            assert got["status"] == "completed", got
            return got
        assert asyncio.get_running_loop().time() < deadline, got["status"]
        await asyncio.sleep(0.5)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def experiments(api):
    for spec_id, script in (("fx-base", THREE), ("fx-cand", "true"), ("fx-flaky", FLAKY)):
        await upload(api, spec(spec_id, script))
    base, cand, flaky = await asyncio.gather(experiment(api, "fx-base"), experiment(api, "fx-cand"),
                                             experiment(api, "fx-flaky", seed=split_seed()))
    return base, cand, flaky


@pytest.mark.timeout(900)
async def test_the_compare_reports_name_the_baselines_write_with_its_keys(api, experiments, tmp_path):
    base, cand, _ = experiments
    md, html = tmp_path / "compare.md", tmp_path / "compare.html"
    code, _, err = await svc_in_thread(api, "eval", "compare", base["id"], cand["id"], "--markdown", str(md), "--html", str(html))
    assert code == 0, err
    assert f"      - {WROTE}\n" in err
    markdown = md.read_text()
    assert "### Effects that differ" in markdown
    [row] = [line for line in markdown.splitlines() if "orders" in line]
    assert row.startswith("| `(no matrix)` |") and WROTE in row.replace("\\", ""), row
    page = html.read_text()
    assert "Effects that differ" in page and WROTE in page


@pytest.mark.timeout(900)
async def test_the_tui_compare_screen_and_effects_tab_show_the_write(api, experiments, tmp_path):
    from tui.app import SvcApp
    from tui.screens.compare import CompareScreen
    from tui.screens.run import RunScreen

    base, cand, _ = experiments
    app = SvcApp(ClientConfig(base_url=api.base_url(), api_key=api.key, timeout=30.0, home=tmp_path, api_key_source="test"))
    async with app.run_test(size=(180, 50)) as pilot:
        await app.push_screen(CompareScreen(base["id"], cand["id"]))
        await wait_for(pilot, lambda: app.screen.result is not None, timeout=60, what="the comparison")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "Effects that differ: 1 between the experiments, 0 between replicas, in 1 scenario(s)" in text, text
        [row] = [line for line in text.splitlines() if "orders" in line]
        assert "between" in row and WROTE in row, row

        _, runs = await api.get("/v1/runs", params={"experiment_id": base["id"]})
        run_id = runs["items"][0]["id"] if isinstance(runs, dict) else runs[0]["id"]
        await app.push_screen(RunScreen(run_id=run_id))
        screen = app.screen
        await wait_for(pilot, lambda: screen.effects is not None, timeout=30, what="the effect ledger")
        await pilot.press("5")
        await wait_for(pilot, lambda: "Database writes (1)" in screen_text(app), what="the effects tab")
        [row] = [line for line in screen_text(app).splitlines() if "orders" in line and "insert" in line]
        assert row.split()[:6] == ["orders", "insert", "3", "1", "db", "id=3,4,5"], row


@pytest.mark.timeout(900)
async def test_compare_names_the_effect_that_differs_between_replicas(api, experiments):
    base, _, flaky = experiments
    response, result = await api.post("/v1/experiments/compare", json={"baseline_id": base["id"], "candidate_id": flaky["id"]})
    assert response.status == 200, result
    [scenario] = result["effects"]
    assert [(d["side"], d["key"], d["baseline"], d["candidate"]) for d in scenario["differences"]] == [
        ("candidate", "db orders insert", [3, 3], [1, None])]
    message = "the candidate's 2 replicas differ on orders insert (db): 1, none"
    assert scenario["differences"][0]["message"] == message
    code, _, err = await svc_in_thread(api, "eval", "compare", base["id"], flaky["id"])
    assert code == 0, err
    assert f"      - {message}\n" in err
