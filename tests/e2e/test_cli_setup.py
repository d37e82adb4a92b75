"""`svc setup` and `svc doctor` as real subprocesses against an in-process daemon over TCP, in a
throw-away project with HOME (for ~/.codex and ~/.gemini) inside the test's directory."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tarfile
import tomllib
from pathlib import Path

import pytest

from client.tracing import sdk
from daemon.spec import load_spec
from tests.support.cli import cli_environ, free_port, run_cli

AGENT = """\
import os
from openai import OpenAI

client = OpenAI(api_key=os.environ.get("OPENAI_API_KEY", "x"))
print(client)
"""
VENV_BIN = str(Path(os.sys.executable).parent)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "my-agent"
    root.mkdir()
    (root / "agent.py").write_text(AGENT)
    return root


@pytest.fixture
def env(daemon, tmp_path):
    return cli_environ(daemon.base_url(), daemon.key, tmp_path, PATH=VENV_BIN + os.pathsep + os.environ["PATH"])


async def setup(env, project, *args):
    result = await asyncio.to_thread(run_cli, env, "setup", *args, cwd=project)
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def phase(summary, name):
    return next(p for p in summary["phases"] if p["phase"] == name)


async def test_a_first_setup_changes_every_file_phase(env, project):
    result, summary = await setup(env, project, "--agents", "all")
    assert result.returncode == 0, result.stderr
    assert summary["changed"] == ["skills", "mcp", "spec", "install", "snapshot"]


async def test_a_second_setup_reports_no_change(env, project):
    await setup(env, project, "--agents", "all")
    result, summary = await setup(env, project, "--agents", "all")
    assert (summary["changed"], result.stderr.splitlines()[-1]) == ([], "svc: setup: no change")


async def test_status_json_shows_pending_phases_and_writes_nothing(env, project):
    result, summary = await setup(env, project, "--status", "--json", "--agents", "claude")
    assert {p["phase"]: p["status"] for p in summary["phases"]} == {
        "skills": "pending", "mcp": "pending", "spec": "pending", "instrument": "pending", "install": "pending",
        "snapshot": "pending", "doctor": "no change"}
    assert sorted(p.name for p in project.iterdir()) == ["agent.py"]


async def test_mcp_merge_keeps_other_servers_and_unknown_keys_and_writes_a_backup(env, project):
    original = {"mcpServers": {"other": {"command": "other-server"}}, "theme": "dark"}
    (project / ".mcp.json").write_text(json.dumps(original))
    await setup(env, project, "mcp", "--agents", "claude")
    merged = json.loads((project / ".mcp.json").read_text())
    assert merged == {"mcpServers": {"other": {"command": "other-server"}, "svc": {"command": "svc", "args": ["mcp", "serve"]}},
                      "theme": "dark"}
    assert json.loads((project / ".mcp.json.bak").read_text()) == original


async def test_an_unparsable_mcp_file_is_refused_with_the_snippet_printed(env, project):
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").write_text("{ not json")
    result, _ = await setup(env, project, "mcp", "--agents", "cursor")
    assert (project / ".cursor" / "mcp.json").read_text() == "{ not json"
    assert "refused" in result.stderr and '"svc": {' in result.stderr


async def test_a_refused_mcp_file_fails_the_setup_and_shows_as_refused(env, project):
    (project / ".mcp.json").write_text("{ not json")
    result, summary = await setup(env, project, "mcp", "--agents", "claude")
    assert (result.returncode, phase(summary, "mcp")["status"]) == (1, "refused")


async def test_a_dry_run_names_the_phases_it_would_change_and_writes_nothing(env, project):
    result, _ = await setup(env, project, "--dry-run", "--agents", "claude")
    assert result.stderr.splitlines()[-1] == "svc: setup: would change skills, mcp, spec, install, snapshot"
    assert sorted(p.name for p in project.iterdir()) == ["agent.py"]


async def test_codex_toml_gets_one_table_and_every_other_byte_stays(env, project, tmp_path):
    codex = tmp_path / ".codex" / "config.toml"
    codex.parent.mkdir()
    original = '# my settings\nmodel = "o3"  # keep this comment\n\n[mcp_servers.other]\ncommand = "x"\n'
    codex.write_text(original)
    await setup(env, project, "mcp", "--agents", "codex")
    text = codex.read_text()
    assert text.startswith(original)
    assert tomllib.loads(text)["mcp_servers"] == {"other": {"command": "x"}, "svc": {"command": "svc", "args": ["mcp", "serve"]}}


async def test_gemini_settings_are_merged_under_home(env, project, tmp_path):
    await setup(env, project, "mcp", "--agents", "gemini")
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["mcpServers"]["svc"]["args"] == ["mcp", "serve"]


async def test_the_starter_spec_validates(env, project):
    await setup(env, project, "spec")
    text = (project / "svc.yaml").read_text()
    assert load_spec(text, "svc.yaml").agent.snapshot == "my-agent"


async def test_an_existing_spec_is_left_alone(env, project):
    (project / "svc.yaml").write_text("mine\n")
    result, summary = await setup(env, project, "spec")
    assert (project / "svc.yaml").read_text() == "mine\n" and phase(summary, "spec")["status"] == "no change"


async def test_an_agent_run_from_a_subfolder_imports_the_installed_sdk(env, project):
    (project / "agent.py").unlink()
    (project / "src").mkdir()
    (project / "src" / "main.py").write_text(AGENT)
    entry = ["--entrypoint", "python3 src/main.py"]
    await setup(env, project, "install", *entry)
    await setup(env, project, "instrument", "--apply", *entry)
    ran = await asyncio.to_thread(subprocess.run, [os.sys.executable, "src/main.py"], cwd=project, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


async def test_instrument_only_shows_the_change_without_apply(env, project):
    result, _ = await setup(env, project, "instrument")
    assert (project / "agent.py").read_text() == AGENT
    assert "+client = wrap_openai(OpenAI(" in result.stderr


async def test_instrument_apply_wraps_the_client_and_imports_the_wrapper(env, project):
    await setup(env, project, "instrument", "--apply")
    text = (project / "agent.py").read_text()
    assert "from svc_tracing import wrap_openai\n" in text and 'client = wrap_openai(OpenAI(api_key=' in text


async def test_instrument_without_the_sdk_copy_imports_the_installed_package(env, project):
    await setup(env, project, "instrument", "--apply", "--no-install-sdk")
    assert "from client.tracing import wrap_openai\n" in (project / "agent.py").read_text()


async def test_install_puts_the_tracing_sdk_beside_the_agent(env, project):
    await setup(env, project, "install")
    assert (project / "svc_tracing.py").read_text() == Path(sdk.__file__).read_text()


async def test_snapshot_uploads_the_project_once(env, project, daemon):
    await setup(env, project, "snapshot")
    await setup(env, project, "snapshot")
    response, versions = await daemon.get("/v1/agents/my-agent/versions")
    assert response.status == 200 and versions["count"] == 1


async def test_the_snapshot_leaves_env_files_backups_and_virtualenvs_behind(env, project, daemon):
    (project / ".env").write_text("OPENAI_API_KEY=sk-not-for-the-sandbox\n")
    (project / ".mcp.json.bak").write_text("{}")
    (project / "venv").mkdir()
    (project / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    result, summary = await setup(env, project, "snapshot")
    assert result.returncode == 0, result.stderr
    _, latest = await daemon.get("/v1/agents/my-agent/latest")
    with tarfile.open(latest["storage_path"]) as bundle:
        assert sorted(bundle.getnames()) == ["agent.py"]


async def test_unknown_agent_is_named(env, project):
    result, _ = await setup(env, project, "--agents", "claude,emacs")
    assert result.returncode == 1 and "unknown agent emacs" in result.stderr


async def test_doctor_passes_on_a_working_setup(env, project):
    result = await asyncio.to_thread(run_cli, env, "doctor", cwd=project)
    assert result.returncode == 0, result.stderr


async def test_doctor_lists_the_nodes_sandboxes_run_on(env, project):
    result = await asyncio.to_thread(run_cli, env, "doctor", cwd=project)
    line = next((x for x in result.stderr.splitlines() if "nodes:" in x), "")
    assert line.startswith("ok") and "docker: local ready" in line, result.stderr


async def test_doctor_names_a_refused_key_with_a_hint(env, project):
    result = await asyncio.to_thread(run_cli, {**env, "SERVICE_API_KEY": "svc_live_" + "n" * 32}, "doctor", cwd=project)
    assert result.returncode == 1 and "FAIL  key accepted: 401 unauthorized: run `svc login`" in result.stderr


async def test_doctor_names_an_unreachable_docker_engine_with_a_hint(env, project, tmp_path):
    result = await asyncio.to_thread(run_cli, {**env, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}, "doctor", cwd=project)
    assert result.returncode == 1 and "FAIL  Docker engine: not reachable" in result.stderr and "start dockerd" in result.stderr


async def test_doctor_says_when_svc_is_not_on_path(env, project):
    result = await asyncio.to_thread(run_cli, {**env, "PATH": "/usr/bin:/bin"}, "doctor", cwd=project)
    assert result.returncode == 1 and "FAIL  svc on PATH: not found: activate the venv" in result.stderr


async def test_doctor_names_an_unreachable_daemon(env, project):
    result = await asyncio.to_thread(run_cli, {**env, "SERVICE_BASE_URL": f"http://127.0.0.1:{free_port()}"}, "doctor", cwd=project)
    assert result.returncode == 1 and "FAIL  daemon reachable" in result.stderr


async def test_doctor_names_a_broken_env_file_line(env, project):
    (project / ".env").write_text("GOOD=1\nthis line is wrong\n")
    result = await asyncio.to_thread(run_cli, env, "doctor", cwd=project)
    assert result.returncode == 1 and "FAIL  env files: lines without NAME=VALUE at .env:2" in result.stderr


async def test_without_agents_it_sets_up_the_editors_it_finds(env, project):
    (project / ".cursor").mkdir()
    result, summary = await setup(env, project, "mcp")
    assert summary["agents"] == ["cursor"] and (project / ".cursor" / "mcp.json").exists() and not (project / ".mcp.json").exists()


async def test_a_second_codex_merge_changes_nothing(env, project, tmp_path):
    await setup(env, project, "mcp", "--agents", "codex")
    before = (tmp_path / ".codex" / "config.toml").read_text()
    result, summary = await setup(env, project, "mcp", "--agents", "codex")
    assert phase(summary, "mcp")["status"] == "no change" and (tmp_path / ".codex" / "config.toml").read_text() == before


async def test_an_outdated_codex_table_is_rewritten_in_place(env, project, tmp_path):
    codex = tmp_path / ".codex" / "config.toml"
    codex.parent.mkdir()
    head, tail = 'model = "o3"\n\n', '[profiles.fast]\nmodel = "o4-mini"  # mine\n'
    codex.write_text(head + '[mcp_servers.svc]\ncommand = "/old/svc"\nargs = ["serve"]\n\n' + tail)
    await setup(env, project, "mcp", "--agents", "codex")
    text = codex.read_text()
    assert text.startswith(head) and text.endswith(tail)
    assert tomllib.loads(text)["mcp_servers"]["svc"] == {"command": "svc", "args": ["mcp", "serve"]}
