"""Spec builders shared by several test modules. Every image name comes from `tests.support.images`."""
from __future__ import annotations

import json
from typing import Any

from tests.support.images import PYTHON

# The smallest spec the API accepts: a cli agent (`sh`) and one file check.
SPEC_YAML = f"""\
version: 1
id: hello
base: {PYTHON}
task:
  prompt: write hello.txt
agent:
  type: cli
  binary: sh
invariants:
  wrote:
    check:
      type: file_exists
      path: hello.txt
"""


def hello_yaml(spec_id: str) -> str:
    """A spec whose agent writes hello.txt (passes when run), with id `spec_id`."""
    return f"""\
version: 1
id: {spec_id}
base: {PYTHON}
task:
  prompt: write hello.txt
agent:
  type: cli
  binary: sh
  args: ["-c", "echo hi > hello.txt"]
invariants:
  wrote:
    check:
      type: file_exists
      path: hello.txt
"""


def spec(spec_id: str, **blocks: Any) -> dict[str, Any]:
    """A minimal valid spec document with extra top-level blocks."""
    doc: dict[str, Any] = {
        "version": 1,
        "id": spec_id,
        "base": PYTHON,
        "task": {"prompt": "test"},
        "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}},
    }
    doc.update(blocks)
    return doc


def cli_spec(spec_id: str, script: str, invariants: dict[str, Any], *, timeout: str = "30s", **blocks: Any) -> dict[str, Any]:
    """A spec whose agent is `sh -c script` in the stock python image."""
    doc: dict[str, Any] = {
        "version": 1,
        "id": spec_id,
        "base": PYTHON,
        "task": {"prompt": "do the thing"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", script], "timeout": timeout},
        "invariants": invariants,
        "resources": {"timeout": "3m"},
    }
    doc.update(blocks)
    return doc


def inv(check: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"check": check, **extra}


# --- experiments -------------------------------------------------------------------------------------

_EXPERIMENT_SPEC = """\
version: 1
id: {id}
base: {base}
task:
  prompt: "mode {{{{ mode }}}}"
agent:
  type: cli
  binary: sh
invariants:
  ok:
    check:
      type: file_exists
      path: ok.txt
scoring:
  replica_aggregation:
    strategy: {strategy}
{extra}
"""


def spec_yaml(id: str = "demo", *, strategy: str = "majority", matrix: list[dict] | None = None, replicas: int | None = None,
              extra: str = "") -> str:
    """An experiment spec whose prompt carries the `mode` a `FakeRunner` obeys."""
    lines = []
    if replicas or matrix:
        lines.append("parallelism:")
        if replicas:
            lines.append(f"  replicas: {replicas}")
        if matrix:
            lines.append("  matrix:")
            lines += [f"    - {json.dumps(entry)}" for entry in matrix]
    return _EXPERIMENT_SPEC.format(id=id, base=PYTHON, strategy=strategy, extra="\n".join(lines) + "\n" + extra)


# An agent for the real engine. good: always passes; bad: never; flaky: fails when the seed's last
# hex digit is odd.
EXPERIMENT_AGENT = ('case "$SERVICE_TASK_PROMPT" in'
                    ' *good*) echo ok > ok.txt;;'
                    ' *flaky*) case "$SERVICE_SEED" in *[13579bdf]) ;; *) echo ok > ok.txt;; esac;;'
                    ' esac')


def tiny_spec(spec_id: str = "tiny", agent: str = EXPERIMENT_AGENT, *, replicas: int = 3, matrix: list[dict] | None = None,
              strategy: str = "majority") -> dict[str, Any]:
    """An experiment spec for the real engine: `agent` is a shell script."""
    return {
        "version": 1,
        "id": spec_id,
        "base": PYTHON,
        "task": {"prompt": "mode {{ mode }}"},
        "agent": {"type": "cli", "binary": "sh", "args": ["-c", agent], "timeout": "30s"},
        "invariants": {"wrote_ok": {"check": {"type": "file_exists", "path": "ok.txt"}}},
        "scoring": {"replica_aggregation": {"strategy": strategy}},
        "parallelism": {"replicas": replicas, "matrix": matrix if matrix is not None else [{"mode": "bad"}, {"mode": "flaky"}]},
        "resources": {"timeout": "2m"},
    }


# A spec whose model provider key only the model gateway uses (a recorded replay asks for none of it).
RECORDED_SPEC = """\
version: 1
id: recorded
base: localhost/svc/python:3.11
task: {prompt: say hi}
agent: {type: cli, binary: python3, args: [-c, "print('hi')"]}
secrets:
  SVC_TEST_PROVIDER_KEY: env
models:
  providers:
    openai: {key: SVC_TEST_PROVIDER_KEY}
invariants:
  said:
    check: {type: command_exit, command: "true"}
"""


# An agent snapshot built from a local directory (`agent.source`): `svc eval run` uploads it when it changed
FROM_SOURCE_SPEC = f"""\
version: 1
id: from-source
base: {PYTHON}
task:
  prompt: write the answer
agent:
  type: snapshot
  snapshot: my-agent
  source: ./my-agent
  entrypoint: [python3, agent.py]
  timeout: 30s
invariants:
  answer:
    check: {{type: file_content, path: out.txt, equals: good}}
"""
