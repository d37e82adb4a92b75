"""Snapshot tests: every main screen in every bundled theme at 100x30 and 160x45 (and the light
theme at 80x24), against a real daemon seeded through the API and its store (no sandboxes needed).

For each screen we take Textual's SVG screenshot (`App.export_screenshot`) and the plain text the
user sees. The SVG must carry the theme's own background and text colours; the text (ids, clock
times and ages masked) must equal the golden file in tests/tui/snapshots/ (the text does not depend
on the theme, so one golden per screen and size). A missing golden fails; run with
SVC_UPDATE_GOLDENS=1 to write the goldens after an intended change, and review the diff."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from daemon.appkeys import DEFAULT_TENANT_ID, STORE
from daemon.runner import records
from tests.support.goldens import assert_golden
from tests.support.images import PYTHON
from tests.support.tui import make_app, screen_text, upload_spec, wait_for
from tui.screens.compare import CompareScreen
from tui.screens.experiment import ExperimentScreen
from tui.screens.help import HelpScreen
from tui.screens.launch import LaunchScreen
from tui.screens.run import RunScreen

GOLDEN = Path(__file__).parent / "snapshots"
THEMES = ["dark", "light", "high-contrast"]
CASES = [(theme, size) for theme in THEMES for size in ((100, 30), (160, 45))] + [("light", (80, 24))]
IDS = re.compile(r"\b(exp-|run_|scn_|seed_|sb-|sbx_)([0-9a-f]{6,})")
CLOCK = re.compile(r"\b\d\d:\d\d:\d\d\b")
AGE = re.compile(r"(?<![\w.$])\d+[smhd](?= |$)")

TRACE = [
    {"trace_id": "trace-snap", "span_id": "span_root", "event_type": "tool_call", "tool": "agent", "phase": "complete",
     "ts": "2025-01-01T00:00:00Z", "duration_ms": 4200, "status": "ok"},
    *[{"trace_id": "trace-snap", "span_id": f"span_llm{i}", "parent_span_id": "span_root", "event_type": "llm_call",
       "tool": "chat", "phase": "complete", "ts": f"2025-01-01T00:00:0{i}Z", "duration_ms": 900 + i, "status": "ok",
       "cost": {"model": "gpt-4o-mini", "input_tokens": 1000 + i, "output_tokens": 50}} for i in range(3)],
    {"trace_id": "trace-snap", "span_id": "span_tool", "parent_span_id": "span_llm1", "event_type": "tool_call",
     "tool": "run_tests", "phase": "complete", "ts": "2025-01-01T00:00:05Z", "duration_ms": 35, "status": "error",
     "error_type": "tool_error", "output": "2 failed"},
]
SPEC_FILE = f"""\
version: 1
id: snap
base: {PYTHON}
task:
  prompt: fix the bug
agent:
  type: cli
  binary: sh
invariants:
  tests:
    check:
      type: command_exit
      command: pytest -q
parallelism:
  replicas: 2
  matrix:
    - model: small
    - model: large
"""


def mask(text: str) -> str:
    """Ids, clock times and ages change from run to run: masked, keeping every column in place."""
    text = IDS.sub(lambda m: m.group(1) + "#" * len(m.group(2)), text)
    text = CLOCK.sub("hh:mm:ss", text)
    text = AGE.sub(lambda m: "N" * (len(m.group(0)) - 1) + m.group(0)[-1], text)
    return "\n".join(line.rstrip() for line in text.splitlines())


async def seed(daemon, api, root: Path) -> dict:
    await upload_spec(api, "alpha")
    store = daemon.app[STORE]
    await records.insert(store, run_id="run_gate", tenant_id=daemon.app[DEFAULT_TENANT_ID], spec_id="alpha", spec_version=1,
                         seed="seed_snap")
    await records.update(store, "run_gate", status="failed", verdict="fail", reason="gate failed: tests (composite forced to 0)",
                         score=0.0, duration_ms=4200, finished_at="2025-01-01T00:00:05Z", result={
                             "invariant_results": [{"invariant_id": "tests", "status": "failed", "score": 0.0, "gate": True,
                                                    "evidence": {"exit_code": 1, "stdout": "2 failed"}}],
                             "forbidden_results": [], "violations": [],
                             "reproducer": {"command": "svc runs create --spec alpha --spec-version 1 --seed seed_snap"}})
    ids = {}
    for name in ("baseline", "nightly"):
        created = await api.post("/v1/experiments", {"spec_id": "alpha", "name": name, "replicas": 2})
        await api.post(f"/v1/experiments/{created['id']}/cancel")
        ids[name] = created["id"]
    ids["fresh"] = (await api.post("/v1/experiments", {"spec_id": "alpha", "name": "fresh"}))["id"]
    await api.post("/v1/traces", {"events": TRACE})
    (root / "snap.yaml").write_text(SPEC_FILE)
    return ids


def check(name: str, app, theme: str) -> None:
    width, height = app.size
    svg = app.export_screenshot()
    spec = app.get_theme(theme)
    grounds = {c.lower() for c in (spec.background, spec.surface, spec.panel)}
    assert any(c in svg.lower() for c in grounds), f"{name}: the SVG does not use {theme}'s background colours"
    accents = {c.lower() for c in (spec.primary, spec.secondary, spec.accent, spec.variables["footer-key-foreground"])}
    if not isinstance(app.screen, HelpScreen):  # a modal dims what is behind it
        assert any(c in svg.lower() for c in accents), f"{name}: none of {theme}'s accent colours is used"
    for other in THEMES:
        if other != theme and app.get_theme(other).background.lower() not in grounds:
            assert app.get_theme(other).background.lower() not in svg.lower(), f"{name}: {other}'s background leaks into {theme}"
    text = screen_text(app)
    lines = text.splitlines()
    assert len(lines) == height and all(len(line) <= width for line in lines), f"{name}: does not fit {width}x{height}"
    assert "svc ▸" in lines[0] or isinstance(app.screen, HelpScreen), f"{name}: no header"
    assert "^p" in lines[-1], f"{name}: no footer"
    assert_golden(GOLDEN / f"{name}_{width}x{height}.txt", mask(text) + "\n", f"{name} at {width}x{height} ({theme})")


@pytest.mark.parametrize("theme, size", CASES, ids=[f"{t}-{w}x{h}" for t, (w, h) in CASES])
async def test_main_screens(daemon, api, theme, size):
    tmp_path = Path(tempfile.gettempdir()) / "svc-snapshots"  # shown on the launch screen: keep it fixed
    tmp_path.mkdir(exist_ok=True)
    ids = await seed(daemon, api, tmp_path)
    app = make_app(daemon, theme=theme)
    app.animation_level = "none"  # a tab underline caught mid-slide is not a difference
    async with app.run_test(size=size) as pilot:
        dashboard = app.screen
        await wait_for(pilot, lambda: len(dashboard.rows) == 3, what="the experiments")
        await pilot.pause(0.1)
        check("dashboard", app, theme)

        await pilot.press("question_mark")
        await pilot.pause(0.1)
        check("help", app, theme)
        await pilot.press("escape")

        await app.push_screen(ExperimentScreen(ids["nightly"]))
        await wait_for(pilot, lambda: app.screen.detail is not None, what="the experiment")
        await pilot.pause(0.1)
        check("experiment", app, theme)

        await app.push_screen(RunScreen(trace_id="trace-snap"))
        await wait_for(pilot, lambda: len(app.screen.span_tree.index) == 5, what="the trace")
        await pilot.press("n")  # reveal the error
        await wait_for(pilot, lambda: app.screen.span_tree.cursor_node and app.screen.span_tree.cursor_node.data == "span_tool",
                       what="the error span")
        await pilot.pause(0.2)
        check("run", app, theme)
        await pilot.press("escape", "escape")

        await app.push_screen(RunScreen(run_id="run_gate"))
        await wait_for(pilot, lambda: app.screen.info is not None and app.screen._final, what="the failed run")
        await pilot.pause(0.2)
        check("run_failed", app, theme)
        await pilot.press("escape")

        await app.push_screen(CompareScreen(ids["baseline"], ids["nightly"]))
        await wait_for(pilot, lambda: app.screen.result is not None, what="the comparison")
        await pilot.pause(0.1)
        check("compare", app, theme)
        await pilot.press("escape")

        await app.push_screen(LaunchScreen(root=tmp_path))
        launch = app.screen
        await wait_for(pilot, lambda: "snap.yaml" in screen_text(app), what="the spec file")
        await pilot.press("enter")
        await wait_for(pilot, lambda: launch.validated, timeout=30, what="validation")
        await pilot.pause(0.1)
        check("launch", app, theme)
        await pilot.press("escape")

        await pilot.press("s")
        await wait_for(pilot, lambda: app.current_mode == "sandboxes" and app.screen.loaded_once, what="the sandboxes")
        await pilot.pause(0.1)
        check("sandboxes", app, theme)

        await pilot.press("w")
        await wait_for(pilot, lambda: app.current_mode == "launch", what="launch (nothing watched yet)")
        app.action_goto("watch")
        await wait_for(pilot, lambda: "Stop watching" in screen_text(app) and "Not watching" in screen_text(app), what="the watch screen")
        await pilot.pause(0.2)
        check("watch", app, theme)
