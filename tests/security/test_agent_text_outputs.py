"""Text from agents is data everywhere it is shown (issue 36, finding 9): an agent's output, tool
names, trace span names and errors end up in the HTML report, the TUI, the user's terminal and the
Markdown PR report, and none of them may read that text as code.

- HTML report: the run's data is JSON inside a <script>; `<!--`, `</script>` and U+2028 are escaped
  so the element cannot be ended or bent, and a span id `constructor`/`__proto__` is a key like any
  other (the report opens in real headless Chromium with no script error).
- TUI: tool names, experiment names and lifecycle stream lines are plain `Text`, never Rich markup:
  `copied to [/usr/local/bin]` does not crash a view and `[link=...]`/`[@click=...]` show as typed.
- CLI: control characters (ESC sequences that repaint a line) an agent put in trace names, errors or
  evidence are shown visibly escaped, never sent to the terminal (`svc eval run`, `svc runs get`).
- Markdown report: a cell quoting agent text escapes HTML, pipes and newlines.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.support.tui import make_app, screen_text, served_daemon, upload_spec, wait_for

ROOT = Path(__file__).resolve().parents[2]
BRACKETS = "copied to [/usr/local/bin]"
LINK = "[link=http://x]click"
CLICK = "[@click=app.quit]quit[/]"


# --- TUI: agent text is never Rich markup ------------------------------------------------------------

@pytest.fixture
async def tui_daemon(tmp_path):
    os.environ.pop("SERVICE_THEME", None)
    async with served_daemon(tmp_path / "home", "svcsec") as d:
        yield d


@pytest.fixture
async def tui_api(tui_daemon):
    client = tui_daemon.client()
    try:
        yield client
    finally:
        await client.close()


async def test_tool_names_with_brackets_show_as_typed_in_the_experiment_views_m(tui_daemon, tui_api):
    from tui.screens.experiment import ExperimentScreen

    await upload_spec(tui_api, "alpha")
    experiment = await tui_api.post("/v1/experiments", {"spec_id": "alpha", "name": "tools"})
    await tui_api.post("/v1/traces", {"events": [
        {"trace_id": "t-tools", "span_id": f"s-{i}", "experiment_id": experiment["id"], "event_type": "tool_call",
         "tool": tool, "phase": "complete", "duration_ms": 100, "status": "ok"} for i, tool in enumerate((BRACKETS, LINK, CLICK))]})
    app = make_app(tui_daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(ExperimentScreen(experiment["id"]))
        screen = app.screen
        await wait_for(pilot, lambda: screen.detail is not None, what="the experiment")
        await pilot.press("m")  # the per-tool breakdown: crashed on the first tool name (MarkupError)
        await wait_for(pilot, lambda: BRACKETS in screen_text(app), what="the tool row")
        seen = screen_text(app)
        assert LINK in seen and CLICK in seen and app.is_running


async def test_experiment_names_with_markup_show_as_typed_on_the_dashboard_and_the_compare_picker(tui_daemon, tui_api):
    await upload_spec(tui_api, "alpha")
    for name in (BRACKETS, LINK):
        await tui_api.post("/v1/experiments", {"spec_id": "alpha", "name": name})
    app = make_app(tui_daemon)
    async with app.run_test(size=(140, 36)) as pilot:
        await wait_for(pilot, lambda: BRACKETS in screen_text(app), what="the experiment rows")
        assert LINK in screen_text(app)
        await pilot.press("c")  # the baseline picker: the candidate's name in its title, the others listed
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PickExperimentScreen", what="the picker")
        await pilot.pause(0.2)
        seen = screen_text(app)
        assert BRACKETS in seen and LINK in seen and app.is_running


async def test_notifications_quoting_agent_text_show_it_as_typed(tui_daemon):
    """A run error or forbidden-rule message (agent text) is notified as typed."""
    app = make_app(tui_daemon)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        app.screen.notify(f"agent exited: {BRACKETS}", title="run error", severity="error")
        await wait_for(pilot, lambda: BRACKETS in screen_text(app), what="the notification")
        assert app.is_running


@pytest.mark.docker
async def test_the_sandboxes_lifecycle_stream_shows_an_output_line_with_brackets(tui_daemon, tui_api, stock_images):
    from tests.support.images import PYTHON
    from tui.screens.sandboxes import SandboxesScreen

    created = await tui_api.post("/v1/sandboxes", {"image": PYTHON})
    app = make_app(tui_daemon)
    async with app.run_test(size=(160, 36)) as pilot:
        await pilot.press("s")
        screen = await wait_for(pilot, lambda: app.screen if isinstance(app.screen, SandboxesScreen) else None, what="the sandboxes view")
        await wait_for(pilot, lambda: created["id"] in screen.table.keys, what="the sandbox row")
        await wait_for(pilot, lambda: screen.rows[created["id"]].state in ("ready", "running"), timeout=60, what="a ready sandbox")
        await pilot.press("enter")  # its lifecycle stream
        await tui_api.post(f"/v1/sandboxes/{created['id']}/commands", {"command": f"echo '{BRACKETS}' '{LINK}'"})
        await wait_for(pilot, lambda: BRACKETS in screen_text(app), timeout=15, what="the command's line")
        lifecycle = screen.query_one("#lifecycle")
        rows = [[str(c) for c in lifecycle.get_row_at(i)] for i in range(lifecycle.row_count)]
        assert any(r[1] == "command" and BRACKETS in r[3] and LINK in r[3] for r in rows), rows
        assert app.is_running and screen.streaming == created["id"]
        await tui_api.delete(f"/v1/sandboxes/{created['id']}")


# --- HTML, Markdown and terminal: a run whose agent wrote hostile text ---------------------------------

ESC = "\x1b[2K\rPASS"  # clears the line and repaints it
EVIDENCE = {"stdout": "<!-- </script><script>document.title='pwned'</script> \u2028\u2029 & " + ESC}
DIVERGED = 'replay diverged: the agent sent {"cmd": "<img src=x onerror=alert(1)>"} | ok\nnext ' + ESC


class HostileRunner:
    """The scheduler's seam: an agent whose output, trace span ids and error text are hostile."""

    async def __call__(self, app, request):
        from daemon.appkeys import STORE
        from daemon.util import now_iso
        from tests.support.fake_runs import fake_outcome

        mode = (request.matrix_entry or {}).get("mode")
        if mode == "error":
            return fake_outcome(request, status="errored", verdict="error", score=0.0, reason="replay_diverged",
                                error={"step": "agent", "code": "replay_diverged", "message": DIVERGED})
        for span, parent, tool in (("constructor", None, "tool " + ESC), ("__proto__", "constructor", "<!-- x"),
                                   ("hasOwnProperty", "__proto__", "</script>"), ("toString", "constructor", "ok")):
            await app[STORE].execute(
                "INSERT INTO trace_events (tenant_id, trace_id, span_id, parent_span_id, head, ts, event_type, phase, tool, status,"
                " duration_ms, run_id, experiment_id, scenario_id, source, received_at)"
                " VALUES (?, ?, ?, ?, 1, ?, 'tool_call', 'end', ?, 'ok', 5, ?, ?, ?, 'test', ?)",
                (request.tenant_id, f"trace-{request.run_id}", span, parent, now_iso(), tool, request.run_id, request.experiment_id,
                 request.scenario_id, now_iso()))
        return fake_outcome(request, status="failed", verdict="fail", score=0.0, duration_ms=10,
                            invariant_results=[{"invariant_id": "ok", "name": "ok", "status": "failed", "score": 0.0, "evidence": EVIDENCE}])


@pytest.fixture
async def hostile_reports(aiohttp_client, tmp_path):
    from tests.support.experiments import start
    from tests.support.procs import svc_cli
    from tests.support.specs import spec_yaml

    api = await start(aiohttp_client, tmp_path / "home", HostileRunner())
    spec = tmp_path / "hostile.yaml"
    spec.write_text(spec_yaml("hostile", matrix=[{"mode": "fail"}, {"mode": "error"}]))
    out = tmp_path / "reports"
    code, stdout, err = await svc_cli(api, "eval", "run", str(spec), "--poll", "50ms", "--markdown", str(out / "report.md"),
                                      "--html", str(out / "report.html"), cwd=ROOT, home=tmp_path, timeout=120)
    assert code == 1, err
    return json.loads(stdout), out, err


def test_the_html_report_escapes_agent_text_so_nothing_ends_its_script(hostile_reports):
    _, out, _ = hostile_reports
    page = (out / "report.html").read_text()
    data = page[page.index('<script type="application/json" id="data">'):]
    data = data[data.index(">") + 1:data.index("</script>")]
    assert not any(c in data for c in "<>&\u2028\u2029"), "raw <, >, & or a line separator in the embedded JSON"
    assert "\\u003c!--" in data and "\\u003c/script\\u003e" in data
    assert '"constructor"' in data  # the span ids are there, as data
    js = page[page.index("<script>\n"):]
    assert "new Map()" in js and "hasOwnProperty" in js and "D[run.run_id]" not in js


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")) and not os.environ.get("CI"),
                    reason="needs Debian's chromium package (.ci/run installs it; in CI its absence fails)")
def test_the_html_report_of_a_hostile_run_renders_in_headless_chromium(hostile_reports, tmp_path):
    _, out, _ = hostile_reports
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}",
                           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom", (out / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert '<p id="summary">' in dom, dom[:2000]
    summary = ET.fromstring(dom[dom.index('<p id="summary">'):dom.index("</p>", dom.index('<p id="summary">')) + 4]).text
    errors = dom[dom.index('<div id="errors">'):dom.index("</div>", dom.index('<div id="errors">'))]
    assert console == [] and errors == '<div id="errors">' and "pwned" not in dom[:dom.index("</title>")]
    assert "2 scenarios" in summary
    assert "&lt;!-- &lt;/script&gt;&lt;script&gt;document.title='pwned'" in dom  # the evidence, shown as text
    trace = dom[dom.index("trace events</summary>"):]
    # the tree of spans `constructor` > `__proto__` > `hasOwnProperty`, `constructor` > `toString`
    assert '<li>tool \x1b[2K\rPASS ok 5 ms<ul class="tree"><li>&lt;!-- x ok 5 ms<ul class="tree"><li>&lt;/script&gt; ok 5 ms' in trace or \
        "&lt;!-- x ok 5 ms" in trace, trace[:1500]


def test_the_markdown_report_escapes_html_pipes_and_newlines_in_agent_text(hostile_reports):
    from markdown_it import MarkdownIt

    _, out, _ = hostile_reports
    text = (out / "report.md").read_text()
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    rendered = MarkdownIt("commonmark").enable("table").render(text)
    assert "<img" not in rendered and "&lt;img src=x onerror=alert(1)&gt;" in rendered
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    widths, row = [], 0
    for t in tokens:  # every row has as many cells as its table's header: no pipe or newline broke one
        if t.type == "thead_open":
            widths.append(None)
        elif t.type == "tr_open":
            row = 0
        elif t.type in ("th_open", "td_open"):
            row += 1
        elif t.type == "tr_close":
            widths[-1] = widths[-1] or row
            assert row == widths[-1], text
    assert len(widths) == 2


async def test_svc_eval_run_shows_control_characters_visibly(aiohttp_client, tmp_path):
    """`svc eval run` of a spec (a downloaded task) whose text carries an ESC sequence: its error lines
    show the sequence visibly instead of letting it clear and repaint the line; progress, build
    output, check evidence and daemon errors go through the same `say` (client.terminal.printable)."""
    from tests.support.experiments import start
    from tests.support.procs import svc_cli

    api = await start(aiohttp_client, tmp_path / "home", HostileRunner())
    spec = tmp_path / "hostile.yaml"
    spec.write_text(f'version: 1\nid: hostile\nbase: "img{ESC.replace(chr(27), chr(92) + "e").replace(chr(13), chr(92) + "r")}"\n'
                    "task: {prompt: hi}\nagent: {type: cli, binary: sh}\n")
    code, _, err = await svc_cli(api, "eval", "run", str(spec), cwd=ROOT, home=tmp_path)
    assert code == 1 and "\x1b" not in err and "\r" not in err, repr(err)
    assert "img\\x1b[2K\\x0dPASS" in err, repr(err)  # the text, shown, not obeyed


def test_agent_text_in_the_tui_shows_its_control_characters_instead_of_sending_them():
    """An effect key, a tool name or an output line holding an escape sequence is shown as typed
    (`\\x1b[2J`), never written to the terminal, where it could clear the screen or retitle it."""
    from tui.format import plain

    assert plain("id=\x1b[2J\x1b]0;owned\x07 ok\n\tnext").plain == "id=\\x1b[2J\\x1b]0;owned\\x07 ok\n\tnext"
