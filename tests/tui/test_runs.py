"""Screens that involve real runs: a real daemon with real Docker sandboxes (the stock python image).
Launch an experiment and see scenarios appear; follow a run live (trace spans and audit events
arriving); forbidden violations pointing at what broke them; compare two experiments; rerun from a
reproducer; the sandboxes view."""
from __future__ import annotations

import pytest

from tests.support.images import PYTHON
from tests.support.tui import eventually, make_app, screen_text, upload_spec, wait_for
from tui.data.common import verdict
from tui.screens.compare import CompareScreen, PickExperimentScreen
from tui.screens.experiment import ExperimentScreen
from tui.screens.launch import LaunchScreen
from tui.screens.run import RunScreen
from tui.screens.sandboxes import SandboxesScreen
from tui.widgets.spec_view import SpecView

pytestmark = pytest.mark.docker

PASSING = f"""\
version: 1
id: {{id}}
base: {PYTHON}
task:
  prompt: write hello.txt
agent:
  type: cli
  binary: sh
  args: ["-c", "{{script}}"]
audit:
  process_spawns: true
invariants:
  wrote:
    description: hello.txt exists
    check:
      type: file_exists
      path: hello.txt
parallelism:
  replicas: {{replicas}}
"""


def spec(spec_id: str, script: str = "echo hi > hello.txt", replicas: int = 1) -> str:
    return PASSING.format(id=spec_id, script=script, replicas=replicas)


async def run_to_end(api, spec_id: str, name: str, **extra) -> dict:
    created = await api.post("/v1/experiments", {"spec_id": spec_id, "name": name, **extra})
    await api.post(f"/v1/experiments/{created['id']}/run", {})

    async def done():
        body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None

    result = await eventually(done, timeout=120)
    assert result, f"{created['id']} did not finish"
    return result


async def test_launch_an_experiment_and_watch_scenarios_appear(daemon, api, stock_images, tmp_path):
    (tmp_path / "hello.yaml").write_text(spec("hello", replicas=3))
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(LaunchScreen(root=tmp_path))
        launch = app.screen
        await wait_for(pilot, lambda: "hello.yaml" in screen_text(app), what="the spec in the file list")
        await pilot.press("enter")  # pick it
        await wait_for(pilot, lambda: launch.validated and not launch.issues, timeout=30, what="offline validation")
        assert "✓ valid" in screen_text(app) and "3 replica(s)" in screen_text(app)
        await pilot.press("ctrl+s", "y")  # asked first: "Start an experiment of hello.yaml (3 runs)?"
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, ExperimentScreen) else None, timeout=30,
                                what="the experiment view")
        await wait_for(pilot, lambda: screen.detail is not None and len(screen.detail.scenarios) == 3, what="three replica rows")
        await wait_for(pilot, lambda: screen.detail.row.status == "completed", timeout=120, what="the experiment to finish")
        await wait_for(pilot, lambda: screen_text(app).count("pass") >= 3, what="the verdicts on screen")
        assert [s.status for s in screen.detail.scenarios] == ["pass", "pass", "pass"]
        assert "3/3" in screen_text(app) and "pass 100%" in screen_text(app)


async def test_launch_shows_validation_errors_at_their_line(daemon, stock_images, tmp_path):
    broken = (tmp_path / "broken.yaml")
    broken.write_text(spec("broken").replace("      type: file_exists", "      type: file_exist").replace("  binary: sh", "  binary: sh\n  timout: 5m"))
    app = make_app(daemon)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(LaunchScreen(root=tmp_path))
        launch = app.screen
        await wait_for(pilot, lambda: "broken.yaml" in screen_text(app), what="the file list")
        await pilot.press("enter")
        await wait_for(pilot, lambda: launch.issues, timeout=30, what="validation errors")
        lines = {issue.line for issue in launch.issues}
        source = broken.read_text().splitlines()
        assert lines == {source.index("  timout: 5m") + 1, source.index("      type: file_exist") + 1}
        rendered = str(launch.query_one(SpecView).render_text()).splitlines()
        at = next(i for i, line in enumerate(rendered) if "timout: 5m" in line)
        assert "└─ agent.timout: unknown key 'timout'" in rendered[at + 1]  # right under the offending line
        assert "2 problem(s)" in screen_text(app)
        await pilot.press("ctrl+s")  # refused: nothing is started
        await wait_for(pilot, lambda: any("not started" in n.message for n in app._notifications), what="the refusal")
        assert isinstance(app.screen, LaunchScreen)


async def test_run_view_follows_a_live_run(daemon, api, stock_images):
    await upload_spec(api, "slow", spec("slow", script="sleep 6; echo hi > hello.txt"))
    created = await api.post("/v1/experiments", {"spec_id": "slow", "name": "slow"})
    await api.post(f"/v1/experiments/{created['id']}/run", {})
    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.push_screen(ExperimentScreen(created["id"]))
        experiment = app.screen
        await wait_for(pilot, lambda: experiment.detail and experiment.detail.scenarios, what="the scenario row")
        run_id = experiment.detail.scenarios[0].run_id

        async def sandbox_of_run():
            try:
                run = await api.get(f"/v1/runs/{run_id}")
            except Exception:
                return None
            return run["sandbox_id"] if run["status"] == "running" and run["sandbox_id"] else None

        sandbox_id = await eventually(sandbox_of_run, timeout=60)
        assert sandbox_id, "the run never started"
        await pilot.press("enter")  # open the run while it runs
        run = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, RunScreen) else None, what="the run view")
        await wait_for(pilot, lambda: run._sandbox_stream, timeout=15, what="the live lifecycle stream")
        # the agent reports spans; an operator runs a command: both arrive while the run is live
        await api.post(f"/v1/sandboxes/{sandbox_id}/trace", {"events": [
            {"span_id": "span_live1", "event_type": "llm_call", "tool": "chat", "phase": "start"},
            {"span_id": "span_live2", "parent_span_id": "span_live1", "event_type": "tool_call", "tool": "pytest",
             "phase": "complete", "status": "error", "error_type": "tool_error", "duration_ms": 40},
        ]})
        await api.post(f"/v1/sandboxes/{sandbox_id}/commands", {"command": "echo probe"})
        await wait_for(pilot, lambda: "span_live2" in run.span_tree.index.spans, timeout=15, what="live spans")
        await wait_for(pilot, lambda: any("echo probe" in e.summary for e in run.audit.events), timeout=15, what="a live audit event")
        assert run.status == "running" and "● live" in screen_text(app)
        await wait_for(pilot, lambda: "pytest" in screen_text(app) or "chat" in screen_text(app), what="spans on screen")
        await wait_for(pilot, lambda: run.terminal, timeout=90, what="the run to finish")
        await wait_for(pilot, lambda: run._final, timeout=15, what="the final results")
        assert verdict(run.status) == "pass"
        await pilot.press("2")
        await wait_for(pilot, lambda: "✓ wrote" in screen_text(app), what="the invariant result")
        await pilot.press("4")
        assert "svc runs create --spec slow" in screen_text(app)
        await pilot.press("y")
        assert app.clipboard.startswith("svc runs create --spec slow") and "--seed" in app.clipboard


async def test_forbidden_violation_points_at_the_breaking_change(daemon, api, stock_images):
    text = spec("fence", script="echo hi > hello.txt; echo x > stray.txt; echo done-writing").replace(
        "parallelism:", "forbidden:\n  file_writes_outside: [/workspace/hello.txt]\nparallelism:")
    await upload_spec(api, "fence", text)
    result = await run_to_end(api, "fence", "fence")
    scenario_run = result["scenarios"][0]["runs"][0]
    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.push_screen(ExperimentScreen(result["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: screen.detail and screen.detail.scenarios, what="the scenarios")
        assert screen.detail.scenarios[0].status == "fail"
        await pilot.press("enter")
        run = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, RunScreen) else None, what="the run view")
        await wait_for(pilot, lambda: run._final and run.violations, timeout=15, what="the violations")
        assert run.run_id == scenario_run["run_id"]
        await pilot.press("2")
        await wait_for(pilot, lambda: "file_writes_outside" in screen_text(app), what="the forbidden rule")
        assert "stray.txt" in screen_text(app)
        await pilot.press("v")  # jump to the change that broke the rule
        diff = run.query_one("#diff-table")
        await wait_for(pilot, lambda: diff.selected_key and diff.selected_key.endswith("stray.txt"), what="the diff entry")
        assert any("file_writes_outside" in n.message for n in app._notifications)
        await pilot.press("slash", *"done-writing")  # the agent's stdout is in the audit log
        await wait_for(pilot, lambda: [run.audit.events[i].summary for i in run.audit.shown if run.audit.events[i].type == "stdout"]
                       == ["agent: done-writing"], what="the agent's output under search")


async def test_compare_two_experiments(daemon, api, stock_images):
    await upload_spec(api, "cmp", spec("cmp"))
    good = await run_to_end(api, "cmp", "good")
    await upload_spec(api, "cmp", spec("cmp", script="echo nope > other.txt"))  # v2 of the same spec regresses
    bad = await run_to_end(api, "cmp", "bad")
    app = make_app(daemon)
    async with app.run_test(size=(120, 40)) as pilot:
        dashboard = app.screen
        await wait_for(pilot, lambda: len(dashboard.rows) == 2, what="both experiments on the dashboard")
        await wait_for(pilot, lambda: "█▁" in screen_text(app), what="the pass-rate sparkline over the spec's history")
        assert "100%" in screen_text(app) and " 0% " in screen_text(app)
        await app.push_screen(ExperimentScreen(bad["id"]))
        await wait_for(pilot, lambda: app.screen.detail is not None, what="the candidate")
        await pilot.press("c")
        picker = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, PickExperimentScreen) else None, what="the picker")
        assert picker.rows[0].id == good["id"]
        await pilot.press("enter")
        compare = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, CompareScreen) else None, what="the compare view")
        await wait_for(pilot, lambda: compare.result is not None, what="the comparison")
        assert (compare.baseline_id, compare.candidate_id) == (good["id"], bad["id"])
        text = screen_text(app)
        # whether it counts as a regression is the daemon's gate (a paired test): shown as it decided
        assert ("REGRESSED" in text) == compare.result.regressed and "baseline good" in text and "candidate bad" in text
        assert "pass_rate" in text and "worse" in text and "100.0%" in text and "-100.0pp" in text
        if compare.result.regressed:
            assert "Regressions" in text and "pass_rate" in text.split("Regressions")[1]
        assert "(no matrix)" in text and "pass" in text and "fail" in text  # the verdict that changed
        await pilot.press("s")  # swap: now it got better
        await wait_for(pilot, lambda: compare.result and compare.result.baseline_id == bad["id"], what="the swapped comparison")
        assert "no regression" in screen_text(app)


async def test_rerun_from_the_reproducer(daemon, api, stock_images):
    await upload_spec(api, "again", spec("again", script="exit 3", replicas=2))
    first = await run_to_end(api, "again", "first")
    original = first["scenarios"][0]["runs"][1]
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(ExperimentScreen(first["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.table.keys) == 2, what="two replica rows drawn")
        await pilot.press("down", "r", "y")  # rerun replica 1 from its reproducer, confirmed
        run = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, RunScreen) else None, timeout=15,
                             what="the new run")
        replay = await api.get(f"/v1/runs/{run.run_id}")
        assert run.run_id != original["run_id"] and replay["seed"] == original["seed"]
        assert replay["replay_of"] == original["run_id"]
        await wait_for(pilot, lambda: run.terminal, timeout=90, what="the rerun to finish")
        assert verdict(run.status) == "fail"  # same seed, same verdict (the run says failed, the scenario fail)
        await pilot.press("escape")
        await pilot.press("R")  # rerun every failure as a new experiment: asked first
        question = await wait_for(pilot, lambda: getattr(app.screen, "question", None), what="the question")
        assert "new experiment" in question and "2 failed" in question
        await pilot.press("y")
        rerun = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, ExperimentScreen) and app.screen is not screen else None,
                               timeout=15, what="the rerun experiment")
        created = await api.get(f"/v1/experiments/{rerun.experiment_id}")
        assert created["filter_failing_from"] == first["id"] and created["total_runs"] == 2


async def test_sandboxes_view_streams_and_deletes(daemon, api, stock_images):
    created = await api.post("/v1/sandboxes", {"image": PYTHON})
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("s")
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, SandboxesScreen) else None, what="the sandboxes view")
        await wait_for(pilot, lambda: created["id"] in screen.table.keys, what="the sandbox row")
        await wait_for(pilot, lambda: screen.rows[created["id"]].state in ("ready", "running"), timeout=60, what="a ready sandbox")
        assert created["id"] in screen_text(app)
        await pilot.press("enter")  # open its lifecycle stream
        await api.post(f"/v1/sandboxes/{created['id']}/commands", {"command": "echo from-the-test"})
        await wait_for(pilot, lambda: "from-the-test" in screen_text(app), timeout=15, what="the lifecycle event")
        lifecycle = screen.query_one("#lifecycle")
        rows = [[str(c) for c in lifecycle.get_row_at(i)] for i in range(lifecycle.row_count)]
        assert any(r[1] == "command" and r[2] == "exit 0" and r[3] == "echo from-the-test" for r in rows), rows
        await pilot.press("escape", "d", "y")  # delete, confirmed
        await wait_for(pilot, lambda: created["id"] not in screen.table.keys, timeout=30, what="the row to go")
        gone = await api.get(f"/v1/sandboxes/{created['id']}")
        assert gone["state"] == "stopped"


async def test_sandboxes_view_shows_the_node_each_sandbox_runs_on(daemon, api, stock_images):
    created = await api.post("/v1/sandboxes", {"image": PYTHON})
    app = make_app(daemon)
    try:
        async with app.run_test(size=(140, 36)) as pilot:
            await pilot.press("s")
            screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, SandboxesScreen) else None, what="the sandboxes view")
            await wait_for(pilot, lambda: created["id"] in screen.rows and screen.rows[created["id"]].node == "local",
                           timeout=60, what="the sandbox placed on the local node")
            row = [str(c) for c in screen.table.get_row(created["id"])]
            assert row[7] == "local"
    finally:
        await api.delete(f"/v1/sandboxes/{created['id']}")


async def test_launch_runs_only_the_ticked_matrix_entries(daemon, api, stock_images, tmp_path):
    text = spec("grid", replicas=2).replace("parallelism:\n  replicas: 2", "parallelism:\n  replicas: 2\n  matrix:\n"
                                            "    - {size: s}\n    - {size: m}\n    - {size: l}")
    (tmp_path / "grid.yaml").write_text(text)
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(LaunchScreen(root=tmp_path))
        launch = app.screen
        await wait_for(pilot, lambda: "grid.yaml" in screen_text(app), what="the spec")
        await pilot.press("enter")
        await wait_for(pilot, lambda: launch.validated, timeout=30, what="validation")
        assert "2 replica(s) × 3 matrix entries = 6 runs" in screen_text(app)
        picker = launch.query_one("#matrix")
        picker.focus()
        picker.highlighted = 1
        await pilot.press("space")  # untick size=m
        await wait_for(pilot, lambda: "× 2 matrix entries = 4 runs" in screen_text(app), what="the new total")
        await pilot.press("ctrl+s", "y")
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, ExperimentScreen) else None, timeout=30,
                                what="the experiment")
        created = await api.get(f"/v1/experiments/{screen.experiment_id}")
        assert created["total_runs"] == 4 and created["matrix"] == [{"size": "s"}, {"size": "l"}]
        await api.post(f"/v1/experiments/{screen.experiment_id}/cancel")


async def test_a_timed_out_run_says_so_on_its_first_line(daemon, api, stock_images):
    await upload_spec(api, "slowpoke", spec("slowpoke", script="sleep 30").replace("  binary: sh", "  binary: sh\n  timeout: 2s"))
    result = await run_to_end(api, "slowpoke", "slowpoke")
    run_id = result["scenarios"][0]["runs"][0]["run_id"]
    app = make_app(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(RunScreen(run_id=run_id))
        run = app.screen
        await wait_for(pilot, lambda: run.info is not None and run._final, timeout=15, what="the run")

        def first_line() -> str:
            return str(run.query_one("#run-summary").render()).splitlines()[0]
        # the summary is drawn on the view's next flush after the run arrives (FLUSH_S)
        await wait_for(pilot, lambda: first_line() != "…", timeout=5, what="the summary drawn")
        first = first_line()
        assert first.startswith("error  agent_timeout after 2s in agent:"), first
