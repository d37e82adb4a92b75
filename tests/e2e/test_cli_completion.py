"""`svc completion`: the generated bash script completes commands, subcommands and flags in a real bash."""
from __future__ import annotations

import subprocess

import pytest

from tests.support.cli import cli_environ, run_cli


@pytest.fixture
def script(tmp_path):
    result = run_cli(cli_environ("http://127.0.0.1:9", None, tmp_path), "completion", "bash")
    assert result.returncode == 0, result.stderr
    path = tmp_path / "svc.bash"
    path.write_text(result.stdout)
    return path


def complete(script, *words: str) -> list[str]:
    line = " ".join(words)
    program = f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _svc_complete; printf "%s\\n" "${{COMPREPLY[@]}}"'
    return subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True).stdout.split()


def test_top_level_commands(script):
    assert complete(script, "svc", "lo") == ["logs", "login", "logout"]


def test_subcommands_of_a_command(script):
    assert complete(script, "svc", "logs", "sc") == ["scenarios", "scores"]


def test_flags_of_a_subcommand(script):
    assert complete(script, "svc", "setup", "--no") == ["--no-install-sdk"]


def test_flags_after_a_positional(script):
    assert "--gate" in complete(script, "svc", "eval", "compare", "exp-a", "exp-b", "--")


def test_zsh_and_fish_scripts_name_every_command(tmp_path):
    env = cli_environ("http://127.0.0.1:9", None, tmp_path)
    zsh, fish = run_cli(env, "completion", "zsh").stdout, run_cli(env, "completion", "fish").stdout
    assert "bashcompinit" in zsh and "complete -c svc -n '__fish_use_subcommand' -a setup" in fish
