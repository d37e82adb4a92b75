"""The product as a user gets it: the wheel built from the working tree, installed into a fresh venv
outside the checkout, then `svc daemon start`, `svc eval run` of the quickstart (real Docker), the
TUI's first frame headless and the MCP server's tool list, all from that venv."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.homes import short_home
from tests.support.procs import ROOT

TOOLS = {"svc_eval_run", "svc_eval_list", "svc_eval_get", "svc_eval_metrics", "svc_eval_compare",
         "svc_logs_traces", "svc_logs_trace", "svc_logs_spans", "svc_logs_scenarios", "svc_logs_scores",
         "svc_spec_validate", "svc_agents_upload", "svc_runs_get", "svc_runs_replay"}

FIRST_FRAME = textwrap.dedent("""\
    import asyncio, json, client
    from client.config import resolve
    from tui.app import SvcApp

    async def main():
        app = SvcApp(resolve())
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause(0.5)
            print(json.dumps({"screen": type(app.screen).__name__, "theme": app.theme, "client": client.__file__}))

    asyncio.run(main())
""")


@pytest.fixture(scope="module")
def installed(installed_svc):
    return installed_svc


@pytest.fixture(scope="module")
def user(installed, tmp_path_factory):
    """A user's environment: its own home and daemon state, nothing of the checkout on the path."""
    home = short_home("svc-smoke-")
    workdir = tmp_path_factory.mktemp("work")
    # The user's project has packages named like ours: nothing svc runs may import them from the cwd.
    for shadow in ("daemon", "client", "tui"):
        (workdir / shadow).mkdir()
        (workdir / shadow / "__init__.py").write_text(f"raise ImportError('imported {shadow} from the cwd')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERVICE_", "PYTHONPATH", "VIRTUAL_ENV"))}
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and not Path(p).resolve().is_relative_to(ROOT)]
    env.update(HOME=str(workdir), SERVICE_HOME=str(home), SERVICE_SOCKET=str(home / "svcd.sock"), SERVICE_PORT="0",
               SERVICE_NO_AUTO_UPDATE="1", XDG_CONFIG_HOME=str(workdir / "config"),
               PATH=os.pathsep.join([str(installed / "bin"), *path]))
    yield env, workdir
    subprocess.run([str(installed / "bin" / "svc"), "daemon", "stop"], env=env, cwd=workdir, capture_output=True, timeout=60)
    shutil.rmtree(home, ignore_errors=True)


def svc(installed: Path, user, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env, workdir = user
    return subprocess.run([str(installed / "bin" / "svc"), *args], env=env, cwd=workdir, capture_output=True, text=True,
                          timeout=timeout)


IMPORTS = textwrap.dedent("""\
    import json
    import aiohttp, client, daemon, mcp, pydantic, textual, tui
    print(json.dumps([m.__file__ for m in (aiohttp, client, daemon, mcp, pydantic, textual, tui)]))
""")


def test_svc_and_everything_it_imports_come_from_the_fresh_venv(installed, user):
    env, workdir = user
    assert Path(shutil.which("svc", path=env["PATH"])) == installed / "bin" / "svc"
    found = subprocess.run([str(installed / "bin" / "python"), "-P", "-c", IMPORTS], env=env, cwd=workdir, capture_output=True,
                           text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    outside = [f for f in json.loads(found.stdout) if not Path(f).resolve().is_relative_to(installed.resolve())]
    assert outside == []


@pytest.mark.docker
def test_daemon_starts_and_the_quickstart_passes_from_the_wheel(installed, user):
    started = svc(installed, user, "daemon", "start")
    assert started.returncode == 0, started.stderr
    spec = user[1] / "quickstart.yaml"
    spec.write_text((ROOT / "examples" / "quickstart.yaml").read_text())
    result = svc(installed, user, "eval", "run", str(spec), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "completed"


def test_the_tui_draws_its_first_frame_with_the_bundled_themes(installed, user):
    env, workdir = user
    assert svc(installed, user, "daemon", "start").returncode == 0
    frame = subprocess.run([str(installed / "bin" / "python"), "-P", "-c", FIRST_FRAME], env=env, cwd=workdir, capture_output=True,
                           text=True, timeout=120)
    assert frame.returncode == 0, frame.stderr
    drawn = json.loads(frame.stdout.strip().splitlines()[-1])
    assert drawn["client"].startswith(str(installed)) and drawn["theme"]


async def test_the_mcp_server_lists_its_tools(installed, user):
    env, workdir = user
    params = StdioServerParameters(command=str(installed / "bin" / "svc"), args=["mcp", "serve"], env=env, cwd=str(workdir))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
    assert tools == TOOLS


AGENT = "import pathlib\npathlib.Path('answer.txt').write_text({answer!r})\n"
USER_SPEC = """\
version: 1
id: my-eval
base: localhost/svc/python:3.11
task: {prompt: "Write 5 to answer.txt"}
agent: {type: snapshot, snapshot: my-agent, source: ./my-agent, entrypoint: [python3, agent.py], timeout: 1m}
invariants:
  correct: {check: {type: file_content, path: answer.txt, equals: "5"}}
"""


@pytest.mark.docker
def test_a_users_project_runs_its_agent_from_source_and_watch_reruns_on_an_edit(installed, user):
    """The loop a newcomer lives in, from the wheel in their own project: an agent and a spec naming its
    source (no `svc agents upload`), `svc eval run` (it fails), then `svc watch` and an edit of agent.py:
    the agent is uploaded again and the re-run passes."""
    env, workdir = user
    project = workdir / "project"
    (project / "my-agent").mkdir(parents=True)
    (project / "my-agent" / "agent.py").write_text(AGENT.format(answer="4"))
    (project / "my-eval.yaml").write_text(USER_SPEC)
    assert svc(installed, user, "spec", "validate", str(project / "my-eval.yaml")).returncode == 0
    first = subprocess.run([str(installed / "bin" / "svc"), "eval", "run", "my-eval.yaml", "--json"], env=env, cwd=project,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 1 and "uploaded agent my-agent version 1" in first.stderr, first.stderr
    assert [s["verdict"] for s in json.loads(first.stdout)["scenarios"]] == ["fail"]
    watch = subprocess.Popen([str(installed / "bin" / "svc"), "watch", "my-eval.yaml", "--json", "--debounce", "200"], env=env,
                             cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events: list[dict] = []
    try:
        def until(kind: str, count: int) -> None:
            while sum(e["kind"] == kind for e in events) < count:
                line = watch.stdout.readline()  # type: ignore[union-attr]
                assert line, watch.stderr.read()  # type: ignore[union-attr]
                events.append(json.loads(line))

        until("finished", 1)  # the initial run: the source is unchanged, nothing uploaded
        assert "1 fail" in [e for e in events if e["kind"] == "finished"][0]["message"]
        (project / "my-agent" / "agent.py").write_text(AGENT.format(answer="5"))
        until("finished", 2)
    finally:
        watch.send_signal(2)
        watch.wait(60)
    assert [e["message"] for e in events if e["kind"] == "agent"][-1].startswith("uploaded agent my-agent version 2")
    assert "1 pass" in [e for e in events if e["kind"] == "finished"][-1]["message"], events
