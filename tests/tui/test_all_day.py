"""The TUI for all-day use, against a real in-process daemon (no sandboxes needed): stray keys never
act, `e` and `:` work everywhere, lists move like vim, compare cannot be read backwards, tables use
the width, a stopped daemon is a banner, stopped sandboxes show, 100x30 keeps help and the
reproducer on one line, the span detail opens in full, tool metrics fill, the palette finds things
by name, Launch re-reads its files."""
from __future__ import annotations


from daemon.appkeys import DEFAULT_TENANT_ID, STORE
from daemon.runner import records
from daemon.store import experiments as experiment_store
from daemon.store import sandboxes as sandbox_store
from tests.support.specs import hello_yaml
from tests.support.tui import make_app, screen_text, upload_spec, wait_for
from tui.data import ScenarioRow
from tui.screens.compare import CompareScreen, PickExperimentScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.dashboard import DashboardScreen
from tui.screens.experiment import ExperimentScreen
from tui.screens.launch import LaunchScreen
from tui.screens.run import RunScreen
from tui.screens.sandboxes import SandboxesScreen
from tui.watch import ApiLauncher

REPRO = "svc runs create --spec alpha --spec-version 1 --seed seed_1"


async def create(api, name: str, spec_id: str = "alpha") -> dict:
    return await api.post("/v1/experiments", {"spec_id": spec_id, "name": name})


async def finished(daemon, api, name: str, pass_rate: float, spec_id: str = "alpha") -> dict:
    """An experiment the store says completed with `pass_rate` (as the scheduler leaves it)."""
    created = await create(api, name, spec_id)
    store = daemon.app[STORE]
    await experiment_store.start(store, created["id"], "2026-01-01T00:00:00Z")
    await experiment_store.complete(store, created["id"], "2026-01-01T00:00:01Z")
    passed = round(2 * pass_rate)
    await experiment_store.set_summary(store, created["id"], {
        "total_runs": 2, "passed_runs": passed, "failed_runs": 2 - passed, "errored_runs": 0, "pass_rate": pass_rate,
        "pass_rate_ci": [0.0, 1.0], "total_cost_usd": 0.0, "mean_cost_per_run_usd": 0.0, "mean_wall_ms": 1000.0,
        "p95_wall_ms": 1000.0, "total_tool_calls": 0, "mean_tool_calls": 0.0, "tool_success_rate": None,
        "side_effect_violations": 0})
    return created


async def stored_run(daemon, run_id: str = "run_one") -> ScenarioRow:
    """A failed run as the runner records it, and the scenario row the experiment view opens it with."""
    store = daemon.app[STORE]
    await records.insert(store, run_id=run_id, tenant_id=daemon.app[DEFAULT_TENANT_ID], spec_id="alpha", spec_version=1, seed="seed_1")
    await records.update(store, run_id, status="failed", verdict="fail", reason="gate failed: wrote", score=0.0,
                         duration_ms=900, finished_at="2026-01-01T00:00:01Z", result={
                             "invariant_results": [{"invariant_id": "wrote", "status": "failed", "gate": True}],
                             "forbidden_results": [], "violations": [],
                             "reproducer": {"command": REPRO, "seed": "seed_1", "spec_id": "alpha", "spec_version": 1}})
    return ScenarioRow(id=run_id, status="fail", run_id=run_id, seed="seed_1", reproducer=REPRO)


async def run_count(api) -> int:
    return len((await api.get("/v1/runs?limit=100"))["items"])


async def open_run(app, pilot, scenario: ScenarioRow) -> RunScreen:
    await app.push_screen(RunScreen(scenario, spec_id="alpha"))
    run = app.screen
    await wait_for(pilot, lambda: run.info is not None and run._final, what="the run")
    return run


# --- 1. stray keys never act --------------------------------------------------------------------------

async def test_typing_in_the_run_view_searches_the_audit_log_and_starts_nothing(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        run = await open_run(app, pilot, scenario)
        await pilot.press("slash", *"forbidden run 1")
        await pilot.pause(0.3)
        assert (app.screen, run.query_one("#audit-search").value, await run_count(api)) == (run, "forbidden run 1", 1)


async def test_rerun_asks_first_naming_the_seed(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await open_run(app, pilot, scenario)
        await pilot.press("r")
        question = await wait_for(pilot, lambda: app.screen.question if isinstance(app.screen, ConfirmScreen) else None,
                                  what="the question")
        await pilot.press("n")
        await pilot.pause(0.2)
        assert "seed seed_1" in question and await run_count(api) == 1


async def test_launch_typing_a_file_name_filters_the_list_and_loads_it(daemon, tmp_path):
    (tmp_path / "broken.yaml").write_text(hello_yaml("broken").replace("file_exists", "file_exist"))
    (tmp_path / "good.yaml").write_text(hello_yaml("good"))
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(LaunchScreen(root=tmp_path))
        launch = app.screen
        await wait_for(pilot, lambda: "good.yaml" in screen_text(app), what="the file list")
        await pilot.press(*"broken.yaml", "enter")
        await wait_for(pilot, lambda: launch.spec is not None, what="the spec loaded")
        assert (app.screen, launch.spec.path.name, launch.query_one("#spec-files").option_count) == (launch, "broken.yaml", 1)


async def test_launch_reads_its_file_list_again_when_you_come_back(daemon, tmp_path):
    (tmp_path / "first.yaml").write_text(hello_yaml("first"))
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        app.switch_mode("launch")
        launch = app.screen
        launch.root = tmp_path
        launch.rescan()
        await wait_for(pilot, lambda: "first.yaml" in screen_text(app), what="the first file")
        app.action_home()
        (tmp_path / "later.yaml").write_text(hello_yaml("later"))
        app.action_goto("launch")
        await wait_for(pilot, lambda: "later.yaml" in screen_text(app), what="the file made meanwhile")


# --- 2, 3, 12. e, :, vim keys, the palette ----------------------------------------------------------

async def test_e_returns_to_the_dashboard_from_the_run_view(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await open_run(app, pilot, scenario)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen), what="the dashboard")


async def test_j_k_g_G_move_in_the_dashboard(daemon, api):
    await upload_spec(api, "alpha")
    for name in ("one", "two", "three"):
        await create(api, name)
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        dashboard = app.screen
        await wait_for(pilot, lambda: len(dashboard.table.keys) == 3, what="three rows")
        rows = []
        for key in ("j", "j", "k", "G", "g", "end", "home"):
            await pilot.press(key)
            rows.append(dashboard.table.cursor_row)
        assert rows == [1, 2, 1, 2, 0, 2, 0]


async def test_colon_jumps_to_an_experiment_by_name(daemon, api):
    await upload_spec(api, "alpha")
    await create(api, "other")
    wanted = await create(api, "nightly")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.rows) == 2, what="the rows")
        await pilot.press("colon", *"exp nightly", "enter")
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, ExperimentScreen) else None, what="the jump")
        assert screen.experiment_id == wanted["id"]


async def test_the_palette_finds_an_experiment_by_name_first(daemon, api):
    await upload_spec(api, "alpha")
    await create(api, "quickstart nightly")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.rows, what="the row")
        await pilot.press("ctrl+p", *"nightly")
        from textual.command import CommandList

        first = await wait_for(pilot, lambda: (lambda c: c.option_count and str(c.get_option_at_index(0).prompt))(
            app.screen.query_one(CommandList)), what="hits")
        assert "Experiment: quickstart nightly" in first


# --- 5. compare ---------------------------------------------------------------------------------------

async def test_the_baseline_picker_ranks_the_same_spec_first_and_filters_as_you_type(daemon, api):
    await upload_spec(api, "alpha")
    await upload_spec(api, "beta")
    base = await create(api, "alpha-before")
    await create(api, "beta-other", "beta")
    await create(api, "alpha-candidate")
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        dashboard = app.screen
        await wait_for(pilot, lambda: len(dashboard.table.keys) == 3, what="the rows")
        await pilot.press("c")  # on the newest: alpha-candidate
        picker = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, PickExperimentScreen) else None, what="picker")
        ranked = [r.name for r in picker.rows]
        await pilot.press(*"beta")
        await pilot.pause(0.1)
        shown = picker.query_one("#pick-list").option_count
        assert (ranked, shown, "BASELINE" in picker.title_text) == (["alpha-before", "beta-other"], 1, True), base


async def test_compare_names_baseline_and_candidate(daemon, api):
    await upload_spec(api, "alpha")
    fix = await finished(daemon, api, "the-fix", 1.0)
    broken = await finished(daemon, api, "the-broken-one", 0.0)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(CompareScreen(broken["id"], fix["id"]))
        await wait_for(pilot, lambda: app.screen.result is not None, what="the comparison")
        assert f"baseline the-broken-one ({broken['id']})  ←  candidate the-fix ({fix['id']})" in screen_text(app)


async def test_a_verdict_changed_row_opens_both_runs_side_by_side(daemon, api):
    await upload_spec(api, "alpha")
    await stored_run(daemon, "run_before")
    await stored_run(daemon, "run_after")
    store = daemon.app[STORE]
    await records.update(store, "run_before", status="passed", verdict="pass", reason=None, score=1.0)
    fix = await finished(daemon, api, "before", 1.0)
    broken = await finished(daemon, api, "after", 0.0)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(CompareScreen(fix["id"], broken["id"]))
        compare = app.screen
        await wait_for(pilot, lambda: compare.result is not None, what="the comparison")
        from tui.data import VerdictChange
        from tui.screens.run_pair import RunPairScreen

        compare.result.verdict_changes = [VerdictChange("(no matrix)#0", "pass", "fail", "run_before", "run_after")]
        compare.render_all()
        compare.query_one("#changes").focus()
        await pilot.press("enter")
        pair = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, RunPairScreen) else None, what="the pair")
        await wait_for(pilot, lambda: len(pair.infos) == 2, what="both runs")
        sides = [str(pair.query_one(f"#pair-{side}-body").render()).splitlines()[1] for side in ("baseline", "candidate")]
        assert sides == ["pass  passed: all 1 check(s) held", "fail  gate failed: wrote"]


# --- 6. tables use the width, colour on outcome, names say what changed -------------------------------

async def test_names_are_shown_in_full_when_the_terminal_is_wide(daemon, api):
    await upload_spec(api, "alpha")
    await create(api, "quickstart nightly with the new retry prompt")
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.screen.rows, what="the row")
        await wait_for(pilot, lambda: "quickstart nightly with the new retry prompt" in screen_text(app), what="the full name")


async def test_the_matrix_column_shows_what_differs_between_entries(daemon, api):
    shared = "a long system prompt that every entry of this matrix shares word for word"
    await upload_spec(api, "grid", hello_yaml("grid") + "parallelism:\n  matrix:\n"
                      f"    - {{model: gpt-4o-mini, prompt: {shared}}}\n    - {{model: gpt-4o, prompt: {shared}}}\n")
    experiment = await create(api, "grid", "grid")
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(ExperimentScreen(experiment["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: screen.table.row_count == 2, what="the two scenarios")
        cells = [str(screen.table.get_cell(key, "matrix")) for key in screen.table.keys]
        assert cells == ["model=gpt-4o-mini", "model=gpt-4o"]


async def test_a_completed_experiment_where_nothing_passed_is_red(daemon, api):
    await upload_spec(api, "alpha")
    nothing = await finished(daemon, api, "nothing-passed", 0.0)
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        dashboard = app.screen
        await wait_for(pilot, lambda: nothing["id"] in dashboard.table.keys, what="the row")
        status, _name, _runs, rate = dashboard.cells(dashboard.rows[nothing["id"]])[:4]
        error = app.theme_variables["error"]
        assert (str(status.style), str(rate.style)) == (f"bold {error}", error)


async def test_an_experiment_started_without_a_name_says_spec_version_origin_and_time(daemon, api, tmp_path):
    spec = tmp_path / "alpha.yaml"
    spec.write_text(hello_yaml("alpha"))
    experiment_id = await ApiLauncher(api, origin="launch").start(spec)
    await api.post(f"/v1/experiments/{experiment_id}/cancel")
    name = (await api.get(f"/v1/experiments/{experiment_id}"))["name"]
    assert name.startswith("alpha v1 · launch ") and name[-5:-3].isdigit() and name[-3] == ":"


# --- 7. a stopped daemon ------------------------------------------------------------------------------

async def test_a_stopped_daemon_is_a_banner_and_an_action_says_why_it_did_nothing(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await open_run(app, pilot, scenario)
        await api.close()
        await daemon.stop()
        await wait_for(pilot, lambda: "svcd is not answering" in screen_text(app), what="the banner")
        await pilot.press("r")
        await wait_for(pilot, lambda: any("rerun not done" in n.message for n in app._notifications), what="the refusal")
        await daemon.start()


async def test_a_run_opened_while_the_daemon_is_down_says_not_loaded(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.connection == "connected", what="connected")
        await api.close()
        await daemon.stop()
        await wait_for(pilot, lambda: app.connection == "reconnecting", what="reconnecting")
        await app.push_screen(RunScreen(scenario))
        await pilot.pause(0.5)
        line = str(app.screen.query_one("#run-summary").render()).splitlines()[2]
        await daemon.start()
        assert "trace not loaded" in line and "0 spans" not in line


# --- 8. sandboxes -------------------------------------------------------------------------------------

async def test_A_lists_stopped_sandboxes(daemon, api):
    store = daemon.app[STORE]
    await sandbox_store.insert(store, {"id": "sb-stopped01", "tenant_id": daemon.app[DEFAULT_TENANT_ID],
                                       "daemon_id": await sandbox_store.daemon_id(store), "shape": "single", "state": "stopped", "seed": "s",
                                       "image": "python:3.12-slim", "created_at": "2026-01-01T00:00:00Z"})
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("s")
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, SandboxesScreen) and app.screen.loaded_once else None,
                                what="the sandboxes")
        await pilot.press("A")
        await wait_for(pilot, lambda: "sb-stopped01" in screen.table.keys, what="the stopped sandbox")


# --- 9, 10. 100x30, the span detail -------------------------------------------------------------------

async def test_the_run_view_at_100x30_keeps_help_in_the_footer(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_run(app, pilot, scenario)
        await pilot.pause(0.2)
        assert "? Help" in screen_text(app).splitlines()[-1]


async def test_the_reproducer_stays_on_one_line_at_100x30(daemon, api):
    await upload_spec(api, "alpha")
    scenario = await stored_run(daemon)
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        run = await open_run(app, pilot, scenario)
        await pilot.press("4")
        await pilot.pause(0.2)
        assert run.query_one("#repro-body").size.width >= len(REPRO)


async def test_the_span_detail_opens_over_the_screen_with_the_whole_output(daemon, api):
    answer = "the model said: " + "word " * 300 + "THE END"
    await api.post("/v1/traces", {"events": [
        {"trace_id": "t-long", "span_id": "s-llm", "event_type": "llm_call", "tool": "chat", "phase": "complete",
         "duration_ms": 800, "input": [{"role": "user", "content": "fix the bug"}], "output": answer}]})
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(RunScreen(trace_id="t-long"))
        run = app.screen
        await wait_for(pilot, lambda: len(run.span_tree.index) == 1, what="the span")
        run.span_tree.focus()
        await pilot.press("down", "z")
        await pilot.pause(0.2)
        detail = str(run.query_one("#span-detail").render())
        assert (run.maximized is run.query_one("#span-detail-box"), "user: fix the bug" in detail, "THE END" in detail) == (True, True, True)


# --- 11. tool metrics ---------------------------------------------------------------------------------

async def test_m_shows_the_tool_breakdown(daemon, api):
    await upload_spec(api, "alpha")
    experiment = await create(api, "tools")
    await api.post("/v1/traces", {"events": [
        {"trace_id": "t-tools", "span_id": f"s-{i}", "experiment_id": experiment["id"], "event_type": "tool_call",
         "tool": "run_tests", "phase": "complete", "duration_ms": 100, "status": "error" if i else "ok"} for i in range(2)]})
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(ExperimentScreen(experiment["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: screen.detail is not None, what="the experiment")
        await pilot.press("m")
        await wait_for(pilot, lambda: "run_tests" in screen_text(app), what="the tool row")


