"""Pure helpers of the scenario runner: prompt substitution, bundle-relative entrypoints, config
file templates, the reproducer command, signed trajectory URLs and the export paths."""
from __future__ import annotations

import shlex
import time

from daemon.runner import records
from daemon.runner.agent import _bundle_argv, render_template
from daemon.runner.exports import render_to
from daemon.runner.scenario import render_prompt


def test_render_prompt():
    text, unresolved = render_prompt("Count {{ table }} rows in {{db}} for {{ who }}; {{ n }}", {"table": "users", "db": "main", "n": 3})
    assert text == "Count users rows in main for {{ who }}; 3" and unresolved == ["who"]
    assert render_prompt("{{ cfg }}", {"cfg": {"a": 1}})[0] == '{"a": 1}'


def test_bundle_relative_entrypoints():
    files = ["agent.py", "bin/run", "lib/x.py"]
    assert _bundle_argv(["python3", "agent.py", "--fast"], files) == ["python3", "/agent/agent.py", "--fast"]
    assert _bundle_argv(["./bin/run", "lib/x.py"], files) == ["/agent/bin/run", "/agent/lib/x.py"]
    assert _bundle_argv(["/usr/bin/env", "python3"], files) == ["/usr/bin/env", "python3"]


def test_config_templates():
    assert render_template("key={{ K }} {{OTHER}}", {"K": "v"}) == ("key=v {{OTHER}}", ["OTHER"])


def test_reproducer_round_trips_through_a_shell():
    rep = records.reproducer("my-spec", 3, "seed_ab", {"who": "Ada O'Neil"}, {"lang": "fr"})
    argv = shlex.split(rep["command"])
    assert argv[:4] == ["svc", "runs", "create", "--spec"] and argv[4] == "my-spec"
    assert argv[argv.index("--inputs") + 1] == '{"who":"Ada O\'Neil"}'
    assert argv[argv.index("--matrix") + 1] == '{"lang":"fr"}' and argv[-1] == "--wait"
    assert rep["seed"] == "seed_ab" and rep["spec_version"] == 3


def test_trajectory_signatures():
    key = b"k" * 32
    path = records.trajectory_path(key, "run_1", expires=int(time.time()) + 60)
    query = dict(part.split("=") for part in path.split("?")[1].split("&"))
    assert records.check_trajectory_signature(key, "run_1", query["expires"], query["sig"]) is None
    assert records.check_trajectory_signature(key, "run_2", query["expires"], query["sig"]) == "invalid signature"
    assert records.check_trajectory_signature(b"x" * 32, "run_1", query["expires"], query["sig"]) == "invalid signature"
    assert records.check_trajectory_signature(key, "run_1", str(int(query["expires"]) + 1), query["sig"]) == "invalid signature"
    old = records.trajectory_path(key, "run_1", expires=int(time.time()) - 1)
    q = dict(part.split("=") for part in old.split("?")[1].split("&"))
    assert "expired" in records.check_trajectory_signature(key, "run_1", q["expires"], q["sig"])


def test_export_paths():
    assert render_to("runs/{{ run_id }}/{{scenario_id}}.tar.gz", "run_1", None) == "runs/run_1/run_1.tar.gz"
    assert render_to("s/{{ scenario_id }}/db.sql", "run_1", "scn_2") == "s/scn_2/db.sql"
