"""`svc login`, `svc logout`, `svc configure` against a real daemon, and the resolution order
flag > env > .env > config.toml > saved key."""
from __future__ import annotations

import asyncio
import json
import stat

import pytest

from tests.support.cli import cli_environ, free_port, run_cli


@pytest.fixture
def env(daemon, tmp_path):
    """No key in the environment: only what login saves (the daemon's home is elsewhere)."""
    return cli_environ(daemon.base_url(), None, tmp_path)


def saved_key_file(tmp_path):
    return tmp_path / "config" / "svc" / "credentials"


async def cli(env, *args, **kw):
    return await asyncio.to_thread(run_cli, env, *args, **kw)


async def test_login_saves_an_accepted_key_readable_only_by_its_owner(daemon, env, tmp_path):
    result = await cli(env, "login", "--api-key", daemon.key)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(saved_key_file(tmp_path).stat().st_mode) == 0o600


async def test_a_saved_key_is_used_by_later_commands(daemon, env):
    await cli(env, "login", "--api-key", daemon.key)
    listed = await cli(env, "eval", "list")
    assert (listed.returncode, json.loads(listed.stdout)["count"]) == (0, 0), listed.stderr


async def test_login_reads_the_key_from_stdin(daemon, env, tmp_path):
    result = await cli(env, "login", input=daemon.key + "\n")
    assert result.returncode == 0 and daemon.key in saved_key_file(tmp_path).read_text()


async def test_login_takes_the_global_api_key_flag(daemon, env, tmp_path):
    result = await cli(env, "--api-key", daemon.key, "login", input="")
    assert result.returncode == 0 and daemon.key in saved_key_file(tmp_path).read_text(), result.stderr


async def test_a_refused_key_exits_1_and_writes_nothing(env, tmp_path):
    result = await cli(env, "login", "--api-key", "svc_live_" + "x" * 32)
    assert result.returncode == 1 and "refused that key" in result.stderr
    assert not saved_key_file(tmp_path).exists()


async def test_a_refused_key_is_not_echoed(env):
    key = "svc_live_" + "s" * 32
    result = await cli(env, "login", "--api-key", key)
    assert key not in result.stderr + result.stdout


async def test_logout_forgets_the_key(daemon, env):
    await cli(env, "login", "--api-key", daemon.key)
    assert (await cli(env, "logout")).returncode == 0
    after = await cli(env, "eval", "list")
    assert after.returncode == 1 and "401 unauthorized" in after.stderr


async def test_configure_saves_the_base_url_used_when_no_flag_or_env_names_one(daemon, tmp_path):
    env = cli_environ("unused", daemon.key, tmp_path)
    del env["SERVICE_BASE_URL"]
    saved = await cli(env, "configure", "--base-url", daemon.base_url(), "--timeout", "7")
    assert saved.returncode == 0, saved.stderr
    listed = await cli(env, "eval", "list")
    assert listed.returncode == 0, listed.stderr


async def test_configure_refuses_a_bad_timeout_naming_it(env, tmp_path):
    result = await cli(env, "configure", "--timeout", "-3")
    assert (result.returncode, result.stderr.strip()) == (1, "svc: timeout from --timeout must be between 0 and 3600 seconds, got '-3'")


async def test_environment_beats_config_toml(daemon, tmp_path):
    env = cli_environ(f"http://127.0.0.1:{free_port()}", daemon.key, tmp_path)
    await cli(env, "configure", "--base-url", daemon.base_url())
    listed = await cli({**env, "SERVICE_BASE_URL": f"http://127.0.0.1:{free_port()}"}, "--timeout", "1", "eval", "list")
    assert listed.returncode == 1 and "connection refused" in listed.stderr


async def test_dotenv_beats_config_toml(daemon, tmp_path):
    env = cli_environ("unused", daemon.key, tmp_path)
    del env["SERVICE_BASE_URL"]
    await cli(env, "configure", "--base-url", f"http://127.0.0.1:{free_port()}")
    (tmp_path / ".env").write_text(f"SERVICE_BASE_URL={daemon.base_url()}\n")
    listed = await cli(env, "eval", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr


async def test_a_broken_config_toml_is_named_and_configure_replaces_it(daemon, tmp_path):
    env = cli_environ("unused", daemon.key, tmp_path)
    del env["SERVICE_BASE_URL"]
    broken = tmp_path / "config" / "svc" / "config.toml"
    broken.parent.mkdir(parents=True)
    broken.write_text("base_url = [unclosed\n")
    named = await cli(env, "eval", "list")
    assert named.returncode == 1 and named.stderr.startswith(f"svc: {broken}:") and named.stderr.count("\n") == 1
    fixed = await cli(env, "configure", "--base-url", daemon.base_url())
    assert fixed.returncode == 0, fixed.stderr
    assert (await cli(env, "eval", "list")).returncode == 0
