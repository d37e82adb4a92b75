"""The seven phases of `svc setup`, in order: skills, mcp, spec, instrument, install, snapshot, doctor.
Each returns a PhaseResult whose changes are applied by `run` unless it is a dry run."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from client.api import ApiError, Client, DaemonUnreachable
from client.routes import R
from client.setup import doctor, instrument, mcp_config, skills
from client.setup.plan import PhaseResult, planned, read_text

PHASES = ("skills", "mcp", "spec", "instrument", "install", "snapshot", "doctor")
SPEC_FILE = "svc.yaml"
SCHEMA_FILE = ".svc/spec.schema.json"  # the spec files' JSON Schema, for the editor (svc spec schema)
SCHEMA_LINE = f"# yaml-language-server: $schema={SCHEMA_FILE}"
ENTRYPOINT_GUESSES = ("agent.py", "main.py", "app.py")


@dataclass
class Options:
    project: Path
    home: Path
    agents: tuple[str, ...]
    install_sdk: bool = True
    apply_instrument: bool = False
    dry_run: bool = False
    entrypoint: list[str] | None = None
    cli_version: str = ""

    @property
    def agent_name(self) -> str:
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self.project.resolve().name).strip("-.") or "agent"
        return name.replace("..", ".")[:128]

    def guessed_entrypoint(self) -> list[str] | None:
        if self.entrypoint:
            return self.entrypoint
        found = next((n for n in ENTRYPOINT_GUESSES if (self.project / n).is_file()), None)
        return ["python3", found] if found else None

    def sdk_dir(self) -> Path:
        """Where the agent imports from: its entry script's folder (Python puts it first on sys.path),
        else the project root (`python -m pkg.main` and unknown entrypoints run from there)."""
        script = next((a for a in self.guessed_entrypoint() or [] if a.endswith(".py")), None)
        if script:
            path = (self.project / script).resolve()
            if path.is_file() and path.is_relative_to(self.project.resolve()):
                return path.parent
        return self.project


def plan_skills(opts: Options) -> PhaseResult:
    result = PhaseResult("skills")
    for agent in opts.agents:
        result.changes += skills.plan(agent, opts.project)
    return result


def plan_mcp(opts: Options) -> PhaseResult:
    result = PhaseResult("mcp")
    for agent in opts.agents:
        try:
            result.changes += mcp_config.plan(agent, opts.project, opts.home)
        except mcp_config.Unmergeable as exc:
            result.refused = True
            result.notes.append(f"refused {exc}; add this yourself:\n{exc.snippet}")
    return result


def starter_spec(name: str) -> str:
    return f"""\
{SCHEMA_LINE}
# A starter evaluation written by `svc setup spec`: edit the task and the checks, then
#   svc eval run {SPEC_FILE}
version: 1
id: {name}
description: Starter evaluation of {name}
base: localhost/svc/python:3.11
task:
  prompt: "Describe the task the agent should do here"
agent:
  type: snapshot
  snapshot: {name}
  timeout: 5m
invariants:
  left_a_result:
    description: The agent wrote result.txt in its workspace
    check:
      type: file_exists
      path: result.txt
parallelism:
  replicas: 1
"""


def plan_spec(opts: Options) -> PhaseResult:
    result = PhaseResult("spec")
    path = opts.project / SPEC_FILE
    existing = read_text(path)
    if existing is not None:
        note = f"{path} exists; left as it is"
        if SCHEMA_FILE not in existing:
            note += (f" (for completion and checks in your editor, make this its first line: {SCHEMA_LINE},"
                     f" and write the schema with: svc spec schema -o {SCHEMA_FILE})")
        result.notes.append(note)
    else:
        result.changes += planned(path, starter_spec(opts.agent_name))
    if existing is None or SCHEMA_FILE in existing:  # the schema the spec's first line names, kept current
        from daemon.spec.schema import spec_json_schema_text

        result.changes += planned(opts.project / SCHEMA_FILE, spec_json_schema_text(),
                                  brief="the JSON Schema of spec files (svc spec schema), for your editor")
    return result


def sdk_module(opts: Options) -> str:
    return instrument.SDK_FILE[:-3] if opts.install_sdk else "client.tracing"


def plan_instrument(opts: Options) -> PhaseResult:
    result = PhaseResult("instrument")
    result.changes = instrument.plan(opts.project, sdk_module(opts))
    if result.changes and not opts.apply_instrument:
        result.notes.append("suggested only: run `svc setup instrument --apply` to make this change")
    return result


def plan_install(opts: Options) -> PhaseResult:
    result = PhaseResult("install")
    if not opts.install_sdk:
        result.notes.append("skipped (--no-install-sdk): the agent imports client.tracing from an installed svc")
        return result
    from client.tracing import sdk

    result.changes += planned(opts.sdk_dir() / instrument.SDK_FILE, Path(sdk.__file__).read_text())
    return result


def snapshot_skips(path: Path) -> bool:
    """Env files (the user's keys), svc setup's own .bak files and virtualenvs stay on this machine."""
    name = path.name
    if name == ".env" or name.startswith(".env."):
        return True
    if path.is_dir():
        return (path / "pyvenv.cfg").exists()
    return name.endswith(".bak")


async def snapshot_phase(opts: Options, client: Client) -> PhaseResult:
    """Uploads the project directory as a new version of the agent unless the latest has the same bytes."""
    from client.commands.agents import pack_directory

    result = PhaseResult("snapshot")
    entrypoint = opts.guessed_entrypoint()
    if entrypoint is None:
        result.notes.append(f"skipped: no {'/'.join(ENTRYPOINT_GUESSES)} found; pass --entrypoint 'python3 your_agent.py'")
        return result
    left_out: list[str] = []

    def leave_out(path: Path) -> bool:
        if snapshot_skips(path):
            left_out.append(path.relative_to(opts.project).as_posix())
            return True
        return False

    bundle = pack_directory(opts.project, leave_out)
    if left_out:
        result.notes.append(f"left out of the snapshot: {', '.join(sorted(left_out)[:10])}"
                            " (secrets go in the spec's secrets; svc setup's backups and virtualenvs are not the agent)")
    digest = "sha256:" + hashlib.sha256(bundle).hexdigest()  # the daemon's spelling
    name = opts.agent_name
    try:
        latest = await client.call(R.AGENT_LATEST, name=name)
    except ApiError as exc:
        if exc.status != 404:
            result.failed = True
            result.notes.append(f"cannot read agent {name}: {exc}")
            return result
        latest = None
    except DaemonUnreachable as exc:
        result.failed = True
        result.notes.append(str(exc))
        return result
    result.data["snapshot"] = {"name": name, "digest": digest}
    if latest and latest.get("digest") == digest:
        result.data["snapshot"].update(id=latest["id"], version=latest["version"])
        return result
    result.notes.append(f"{'would upload' if opts.dry_run else 'uploaded'} {name} ({len(bundle)} bytes, {digest[:19]})")
    if opts.dry_run:
        result.pending = True
        return result
    import json

    import aiohttp

    form = aiohttp.FormData()
    form.add_field("metadata", json.dumps({"name": name, "entrypoint": entrypoint}), content_type="application/json")
    form.add_field("bundle", bundle, filename="bundle.tar.gz", content_type="application/gzip")
    try:
        snapshot = await client.call(R.UPLOAD_AGENT, data=form, timeout=max(client.config.timeout, 300))
    except (ApiError, DaemonUnreachable) as exc:
        result.failed = True
        result.notes.append(f"upload refused: {exc}")
        return result
    result.data["snapshot"].update(id=snapshot["id"], version=snapshot["version"])
    result.applied = True
    return result


async def doctor_phase(opts: Options, client: Client) -> PhaseResult:
    result = PhaseResult("doctor")
    checks = await doctor.run_checks(client, opts.project, opts.cli_version)
    result.failed = not all(c.ok for c in checks)
    result.data["checks"] = [c.as_dict() for c in checks]
    result.notes += [c.line() for c in checks]
    return result


FILE_PHASES = {"skills": plan_skills, "mcp": plan_mcp, "spec": plan_spec, "instrument": plan_instrument, "install": plan_install}


async def run_phase(phase: str, opts: Options, client: Client) -> PhaseResult:
    if phase == "snapshot":
        return await snapshot_phase(opts, client)
    if phase == "doctor":
        return await doctor_phase(opts, client)
    result = FILE_PHASES[phase](opts)
    writes = not opts.dry_run and (phase != "instrument" or opts.apply_instrument)
    if writes and result.changes:
        for change in result.changes:
            change.apply()
        result.applied = True
    return result
