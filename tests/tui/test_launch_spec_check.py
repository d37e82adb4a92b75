"""The launch screen shows the last `svc spec check` of the picked spec: a line naming the checks
that were flaky or vacuous."""
from __future__ import annotations

from client.commands.spec_check import summarize
from client.spec_reports import save_report
from tests.support.tui import make_app, screen_text, wait_for
from tui.screens.launch import LaunchScreen

SPEC = """\
version: 1
id: checked
base: localhost/svc/python:3.11
task: {prompt: write hello.txt}
agent: {type: cli, binary: sh, args: ["-c", "echo hi > hello.txt"]}
invariants:
  wrote: {check: {type: file_exists, path: hello.txt}}
  anything: {check: {type: command_exit, command: "true", expect_exit_code: 0}}
"""


def run(run_id: str, status: str, **checks: str) -> dict:
    return {"id": run_id, "status": status, "invariant_results": [{"invariant_id": k, "status": v} for k, v in checks.items()]}


async def test_launch_shows_the_last_spec_check_of_the_spec(daemon, tmp_path):
    (tmp_path / "checked.yaml").write_text(SPEC)
    save_report(daemon.config().home, summarize("checked", "oracle", {
        "oracle": [run("r1", "passed", wrote="passed", anything="passed")],
        "noop": [run("r2", "failed", wrote="failed", anything="passed")],
    }))
    app = make_app(daemon)
    async with app.run_test(size=(120, 36)) as pilot:
        await app.push_screen(LaunchScreen(root=tmp_path))
        await wait_for(pilot, lambda: "checked.yaml" in screen_text(app), what="the spec in the file list")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "spec check failed: anything vacuous" in screen_text(app), timeout=30,
                       what="the spec check line")
