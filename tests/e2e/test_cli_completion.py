"""`svc completion`: the generated bash script completes commands, subcommands and flags in a real bash;
each shell accepts its script (zsh and fish when installed)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import cli_environ, run_cli


IN_CI = os.environ.get("CI") == "true"  # .ci/run installs zsh and fish: there a missing shell fails


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


def test_choices_of_a_positional(script):
    assert (complete(script, "svc", "completion", "z"), complete(script, "svc", "setup", "sn")) == (["zsh"], ["snapshot"])


def test_flags_of_a_subcommand(script):
    assert complete(script, "svc", "setup", "--no") == ["--no-install-sdk"]


def test_flags_after_a_positional(script):
    assert "--gate" in complete(script, "svc", "eval", "compare", "exp-a", "exp-b", "--")


def test_zsh_and_fish_scripts_name_every_command(tmp_path):
    env = cli_environ("http://127.0.0.1:9", None, tmp_path)
    zsh, fish = run_cli(env, "completion", "zsh").stdout, run_cli(env, "completion", "fish").stdout
    assert "bashcompinit" in zsh and "complete -c svc -n '__fish_use_subcommand' -a setup" in fish


def generated(tmp_path, shell: str) -> Path:
    result = run_cli(cli_environ("http://127.0.0.1:9", None, tmp_path), "completion", shell)
    assert result.returncode == 0, result.stderr
    path = tmp_path / f"svc.{shell}"
    path.write_text(result.stdout)
    return path


def test_bash_accepts_the_script(tmp_path):
    assert subprocess.run(["bash", "-n", str(generated(tmp_path, "bash"))], capture_output=True, text=True).stderr == ""


@pytest.mark.skipif(shutil.which("zsh") is None and not IN_CI, reason="zsh is not installed")
def test_zsh_loads_the_script_and_registers_the_completion(tmp_path):
    program = f"autoload -U compinit && compinit -u -d {tmp_path}/zcomp; source {generated(tmp_path, 'zsh')}; print -r -- $_comps[svc]"
    result = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert (result.stderr, result.stdout.strip()) == ("", "_bash_complete -o filenames -F _svc_complete")


@pytest.mark.skipif(shutil.which("fish") is None and not IN_CI, reason="fish is not installed")
def test_fish_completes_commands_from_the_script(tmp_path):
    program = f"source {generated(tmp_path, 'fish')}; complete -C 'svc lo'"
    result = subprocess.run(["fish", "--no-config", "-c", program], capture_output=True, text=True, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert sorted(line.split("\t")[0] for line in result.stdout.splitlines()) == ["login", "logout", "logs"]


@pytest.mark.skipif(shutil.which("zsh") is None and not IN_CI, reason="zsh is not installed")
def test_zsh_loads_the_script_when_the_zshrc_never_ran_compinit(tmp_path):
    program = f"source {generated(tmp_path, 'zsh')}; print -r -- $_comps[svc]"
    result = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert (result.stderr, result.stdout.strip()) == ("", "_bash_complete -o filenames -F _svc_complete")
