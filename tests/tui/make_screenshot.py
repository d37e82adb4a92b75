"""Regenerate tui/SCREENSHOT.txt: plain-text captures of the main screens (100x30) of a TUI session
against a real daemon with real sandboxes (needs Docker and the stock images).

    .venv/bin/python -m tests.tui.make_screenshot
"""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from tests.support.homes import short_home
from tests.support.images import PYTHON
from tests.support.tui import Daemon, make_app, screen_text, upload_spec
from tui.screens.experiment import ExperimentScreen

OUT = Path(__file__).resolve().parents[2] / "tui" / "SCREENSHOT.txt"
SPEC = f"""\
version: 1
id: {{id}}
base: {PYTHON}
task:
  prompt: fix the failing test
agent:
  type: cli
  binary: sh
  args: ["-c", "{{script}}"]
audit:
  process_spawns: true
invariants:
  fixed:
    check:
      type: file_exists
      path: fixed.txt
parallelism:
  replicas: 2
  matrix:
    - model: small
    - model: large
"""
FLAKY = "sleep {sleep}; case $SERVICE_SEED in *[0-4]) exit 1;; esac; echo ok > fixed.txt"
GOOD = "sleep {sleep}; echo ok > fixed.txt"


async def run(api, spec_id: str, name: str, wait: bool = True) -> str:
    created = await api.post("/v1/experiments", {"spec_id": spec_id, "name": name})
    body = await api.get(f"/v1/experiments/{created['id']}")
    for i, scenario in enumerate(body["scenarios"]):  # what each run's LLM calls cost
        for replica in scenario["runs"]:
            await api.post("/v1/traces", {"events": [{
                "span_id": f"span_{replica['run_id']}", "run_id": replica["run_id"], "experiment_id": created["id"],
                "event_type": "llm_call", "tool": "chat", "phase": "complete", "duration_ms": 1800 + 300 * i,
                "cost": {"model": "gpt-4o-mini", "input_tokens": 40000 + 9000 * i, "output_tokens": 3500}}]})
    await api.post(f"/v1/experiments/{created['id']}/run", {})
    while wait:
        body = await api.get(f"/v1/experiments/{created['id']}")
        if body["status"] in ("completed", "failed", "cancelled"):
            break
        await asyncio.sleep(0.3)
    return created["id"]


async def main() -> None:
    short = short_home("svcshot")
    daemon = Daemon(short / "home", short / "s.sock")
    await daemon.start()
    api = daemon.client()
    try:
        await upload_spec(api, "bugfix", SPEC.format(id="bugfix", script=FLAKY.format(sleep=0)))
        await upload_spec(api, "refactor", SPEC.format(id="refactor", script=GOOD.format(sleep=0)))
        for n in range(1, 4):
            await run(api, "refactor", f"refactor nightly {n}")
        flaky = [await run(api, "bugfix", f"bugfix nightly {n}") for n in range(1, 4)]
        await upload_spec(api, "bugfix", SPEC.format(id="bugfix", script=GOOD.format(sleep=0)))
        fixed = await run(api, "bugfix", "bugfix after fix")
        await upload_spec(api, "bugfix", SPEC.format(id="bugfix", script=FLAKY.format(sleep=30)))
        await run(api, "bugfix", "bugfix candidate", wait=False)
        app = make_app(daemon)
        sections = []
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(3.0)
            sections.append(("The experiments dashboard (default screen)", screen_text(app)))
            await app.push_screen(ExperimentScreen(fixed))
            await pilot.pause(1.5)
            sections.append(("An experiment: scenarios (one row per replica run) and metrics", screen_text(app)))
            await pilot.press("question_mark")
            await pilot.pause(0.5)
            sections.append(("? on the experiment view: context help", screen_text(app)))
            await pilot.press("escape", "enter")
            await pilot.pause(2.0)
            await pilot.press("2")
            await pilot.pause(0.3)
            sections.append(("enter on a scenario: the run view (trace tree | audit, checks, diff, reproducer tabs)", screen_text(app)))
            app.action_home()
            await app.push_screen(ExperimentScreen(flaky[0]))
            for _ in range(100):
                if app.screen.detail is not None and app.screen.table.row_count:
                    break
                await pilot.pause(0.1)
            failed = next((i for i, s in enumerate(app.screen.visible()) if s.status != "pass"), None)
            if failed is not None:
                app.screen.table.move_cursor(row=failed)
                await pilot.press("enter")
                for _ in range(100):
                    if getattr(app.screen, "_final", False):
                        break
                    await pilot.pause(0.1)
                await pilot.pause(0.5)
                sections.append(("a failed run: why it failed on the first lines, opened on the tab that explains it",
                                 screen_text(app)))
        text = "svc TUI — text captures of a session at 100x30 (`svc tui`; tests/tui/make_screenshot.py)\n\n"
        for title, body in sections:
            text += f"── {title} " + "─" * max(0, 96 - len(title)) + "\n"
            text += "\n".join(line.rstrip() for line in body.splitlines()) + "\n\n"
        OUT.write_text(text)
        print(f"wrote {OUT}")
    finally:
        await api.close()
        await daemon.stop()
        shutil.rmtree(short, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
