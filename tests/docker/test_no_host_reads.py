"""The daemon never executes or reads anything on its host because a request names it: `command:`,
`file:` and `env` secret sources are not resolved daemon-side (the boot fails naming the secret,
and nothing ran / was read), while the CLI resolves them on the user's machine and uploads the
fixture files a spec names, which then apply end to end (real engine, real CLI subprocesses)."""
from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from tests.support.api import Api
from tests.support.engine import assert_released
from tests.support.images import PYTHON
from tests.support.procs import svc_cli
from tests.support.runs import REPO, cli_spec, inv, run_spec
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def svc(api: Api, *args: str, cwd: Path, **env: str) -> tuple[int, str, str]:
    """The real `svc` CLI (a subprocess) against the in-process daemon over TCP."""
    return await svc_cli(api, *args, cwd=cwd, timeout=240, PYTHONPATH=str(REPO), **env)


async def everything_said_about(api: Api, sandbox_id: str | None = None, run_id: str | None = None) -> str:
    """Every response body and stream event about a sandbox and/or run, as one string."""
    parts = []
    if sandbox_id:
        parts.append(json.dumps((await api.get(f"/v1/sandboxes/{sandbox_id}"))[1]))
        parts.append(json.dumps(await api.events(sandbox_id)))
        parts.append(json.dumps((await api.get("/v1/sandboxes", params={"status": "all"}))[1]))
    if run_id:
        parts.append(json.dumps((await api.get(f"/v1/runs/{run_id}"))[1]))
        parts.append(json.dumps((await api.get("/v1/runs"))[1]))
    return "\n".join(parts)


async def test_command_secret_is_never_run_by_the_daemon(api: Api, docker_client, tmp_path):
    marker = tmp_path / "marker"
    doc = cli_spec("cmd-secret", "true", {"ok": inv({"type": "file_exists", "path": "ok"})},
                   secrets={"X": f"command:touch {marker}"})
    sandbox = await api.create_from_spec(doc)  # POST /v1/sandboxes without X
    assert sandbox["state"] == "error" and sandbox["error"]["step"] == "secrets", sandbox
    message = sandbox["error"]["message"]
    assert "'X' (source command)" in message and "not sent with the request" in message and "svc CLI" in message
    assert_released(docker_client, sandbox["id"])

    run = await run_spec(api, spec_id="cmd-secret")  # POST /v1/runs without X
    assert run["status"] == "errored" and run["reason"] == "boot_failed", run
    assert run["error"]["sandbox_error"]["step"] == "secrets" and "'X'" in run["error"]["message"]
    await asyncio.sleep(0.5)
    assert not marker.exists(), "the daemon ran a secret's command on its host"


async def test_file_secret_is_never_read_by_the_daemon(api: Api, tmp_path):
    content = "host-file-content-" + secrets.token_hex(8)
    host_file = tmp_path / "host-token"
    host_file.write_text(content + "\n")
    doc = cli_spec("file-secret", "true", {"ok": inv({"type": "file_exists", "path": "ok"})},
                   secrets={"HOST_TOKEN": f"file:{host_file}", "REL_TOKEN": "file:host-token"})
    sandbox = await api.create_from_spec(doc)
    assert sandbox["state"] == "error" and sandbox["error"]["step"] == "secrets", sandbox
    assert "'HOST_TOKEN' (source file)" in sandbox["error"]["message"] and "'REL_TOKEN'" in sandbox["error"]["message"]
    run = await run_spec(api, spec_id="file-secret")
    assert run["status"] == "errored" and run["error"]["sandbox_error"]["step"] == "secrets"
    assert "HOST_TOKEN" in run["error"]["message"]
    said = await everything_said_about(api, sandbox["id"], run["id"])
    assert content not in said


async def test_env_secret_is_never_read_from_the_daemons_environment(api: Api, monkeypatch):
    value = "daemon-env-value-" + secrets.token_hex(8)
    monkeypatch.setenv("SVC_DAEMON_ONLY_SECRET", value)  # the in-process daemon's own environment
    doc = cli_spec("env-secret", "true", {"ok": inv({"type": "file_exists", "path": "ok"})},
                   secrets={"SVC_DAEMON_ONLY_SECRET": "env", "OTHER_NAME": "env:SVC_DAEMON_ONLY_SECRET"})
    sandbox = await api.create_from_spec(doc)
    assert sandbox["state"] == "error" and sandbox["error"]["step"] == "secrets", sandbox
    message = sandbox["error"]["message"]
    assert "'SVC_DAEMON_ONLY_SECRET' (source env)" in message and "'OTHER_NAME' (source env)" in message
    run = await run_spec(api, spec_id="env-secret")
    assert run["status"] == "errored" and run["error"]["sandbox_error"]["step"] == "secrets"
    said = await everything_said_about(api, sandbox["id"], run["id"])
    assert value not in said
    # A value sent with the request is what the sandbox gets.
    ok = await api.create_from_spec(spec("env-secret-sent", secrets={"SVC_DAEMON_ONLY_SECRET": "env"}),
                                    secrets={"SVC_DAEMON_ONLY_SECRET": "sent-by-client"})
    assert ok["state"] == "ready", ok
    out = await api.run(ok["id"], 'printf "%s" "$SVC_DAEMON_ONLY_SECRET"')
    assert out["stdout"] == "sent-by-client"
    await api.delete(f"/v1/sandboxes/{ok['id']}")


SPEC_WITH_FILES = f"""\
version: 1
id: cli-fixtures
base: {PYTHON}
task:
  prompt: write the token
agent:
  type: cli
  binary: sh
  args: ["-c", "printf '%s' \\"$TOKEN\\" > token.txt"]
  timeout: 60s
services:
  - name: db
    type: postgres
    wait_for: {{port: 5432, timeout: 60s}}
fixtures:
  - {{service: db, path: sql/seed.sql}}
  - {{path: data/}}
  - {{path: data/a.txt, to: /workspace/copies/}}
secrets:
  TOKEN: "command:cat local-token.txt"
invariants:
  token_sent:
    check: {{type: file_content, path: token.txt, equals: tok-from-the-client}}
  seeded:
    check: {{type: sql, service: db, query: "SELECT count(*) FROM items", expect_scalar: 2}}
  data_a:
    check: {{type: file_content, path: a.txt, equals: alpha}}
  data_b:
    check: {{type: file_content, path: sub/b.txt, equals: beta}}
  copied:
    check: {{type: file_content, path: copies/a.txt, equals: alpha}}
  no_escape:
    check: {{type: file_absent, path: escape}}
resources:
  timeout: 3m
"""


def project(root: Path) -> Path:
    (root / "sql").mkdir(parents=True)
    (root / "sql" / "seed.sql").write_text("CREATE TABLE items (id int primary key, name text);\n"
                                           "INSERT INTO items VALUES (1, 'one'), (2, 'two');\n")
    (root / "data" / "sub").mkdir(parents=True)
    (root / "data" / "a.txt").write_text("alpha")
    (root / "data" / "sub" / "b.txt").write_text("beta")
    (root / "data" / "escape").symlink_to("/etc/hostname")  # leaves the directory: never uploaded
    (root / "local-token.txt").write_text("tok-from-the-client\n")
    spec_file = root / "spec.yaml"
    spec_file.write_text(SPEC_WITH_FILES)
    return spec_file


async def test_cli_resolves_secrets_locally_and_uploads_fixture_files(api: Api, tmp_path):
    spec_file = project(tmp_path / "proj")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # A spec file: the command runs on this machine, in the spec file's directory; the fixture
    # files (a SQL file, a directory, one file copied elsewhere) are uploaded with it.
    code, out, err = await svc(api, "runs", "create", str(spec_file), "--wait", cwd=elsewhere)
    assert code == 0, err + out
    run = json.loads(out)
    assert run["status"] == "passed" and run["spec_id"] == "cli-fixtures", json.dumps(run, indent=1)[:3000]
    assert "tok-from-the-client" not in out + err
    response, record = await api.get("/v1/specs/cli-fixtures")
    assert sorted(f["path"] for f in record["files"]) == ["data/a.txt", "data/sub/b.txt", "sql/seed.sql"]

    # A stored spec id: its YAML is fetched and the command resolves in the current directory.
    code, out, err = await svc(api, "specs", "upload", str(spec_file), cwd=elsewhere)
    assert code == 0, err
    version = json.loads(out)["version"]
    code, out, err = await svc(api, "runs", "create", "cli-fixtures", "--wait", cwd=spec_file.parent)
    assert code == 0, err + out
    again = json.loads(out)
    assert again["status"] == "passed" and again["spec_version"] == version
    # ... and where it cannot be resolved, the CLI says which secret, before anything runs.
    code, out, err = await svc(api, "runs", "create", "cli-fixtures", cwd=elsewhere)
    assert code == 1 and "secret 'TOKEN' (source command:cat local-token.txt)" in err and "--secret" in err


async def test_cli_sandbox_from_a_spec_file_applies_uploaded_fixtures(api: Api, tmp_path):
    spec_file = project(tmp_path / "proj")
    code, out, err = await svc(api, "sandboxes", "create", "--spec", str(spec_file), cwd=tmp_path)
    assert code == 0, err + out
    sandbox = json.loads(out)
    assert sandbox["state"] == "ready" and sandbox["secrets"] == ["TOKEN"], sandbox
    listing = await api.run(sandbox["id"], "find . -path ./.svc -prune -o -type f -print | sort; "
                                           'psql "$SERVICE_SERVICE_DB_URL" -Atc "select name from items order by id"; '
                                           'printf "%s" "$TOKEN"')
    assert listing["stdout"].split() == ["./a.txt", "./copies/a.txt", "./sub/b.txt", "one", "two", "tok-from-the-client"], listing
    await api.delete(f"/v1/sandboxes/{sandbox['id']}")
