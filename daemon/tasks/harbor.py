"""Harbor tasks (the Terminal-Bench team's format) as svc specs.

A Harbor task is a directory:

    instruction.md          the prompt                          -> task.prompt
    task.toml               timeouts, resources, metadata       -> agent.timeout, the verifier's timeout,
                                                                   resources.cpus / memory / disk, the description
    environment/Dockerfile  the image                           -> base: {build: {context: environment}}
    tests/test.sh           the verifier, writes a reward to    -> the invariant `reward`: after the agent, tests/
                            /logs/verifier/reward.txt|json         is unpacked into /tests, test.sh runs in the
                                                                   image's WORKDIR, and the reward must be 1
    solution/solve.sh       the oracle                          -> with oracle=True, the agent

Harbor runs the agent, the oracle and the verifier in the image's WORKDIR (often /app). svc's file
audit, state and diff cover /workspace, so the generated setup command moves the WORKDIR's content
into /workspace and leaves WORKDIR as a link to it: everything done "in /app" is done in the
workspace. The tests travel inside the check's command, so the agent never sees them (Harbor uploads
them after the agent finished). A reward other than 0 or 1 counts as a failure (svc's verdicts are
pass/fail; the reward is printed in the check's output). Whatever cannot be mapped is listed in
`unmapped`, per task, never dropped silently.

Standard library + PyYAML only: the CLI imports this.
"""
from __future__ import annotations

import base64
import errno
import io
import os
import re
import stat
import shlex
import tarfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_WORKDIR = "/app"
TESTS_MAX_BYTES = 512 * 1024  # tests/, gzipped: it travels base64 inside the spec (SERVICE_MAX_SPEC_BYTES)
SPEC_NAME = "svc-task.yaml"  # the generated spec's (virtual) file name inside the task directory
MAPPED_TOML = {
    ("version",), ("metadata",), ("agent", "timeout_sec"), ("verifier", "timeout_sec"),
    ("environment", "build_timeout_sec"), ("environment", "cpus"), ("environment", "memory_mb"),
    ("environment", "storage_mb"), ("environment", "allow_internet"), ("environment", "docker_image"),
}
# keys that carry no meaning when empty (Harbor writes them out by default)
EMPTY_OK = {("environment", "gpus"), ("environment", "mcp_servers"), ("verifier", "env"), ("solution", "env"),
            ("agent", "env")}


class TaskError(ValueError):
    """A directory that is not a usable Harbor task; the message names it and what is missing."""


@dataclass
class HarborTask:
    path: Path
    name: str
    instruction: str
    config: dict[str, Any]
    workdir: str
    has_solution: bool
    unmapped: list[str] = field(default_factory=list)


# A task directory is something people download: every file of it is read without following a
# link (each component opened with O_NOFOLLOW, regular files only), and a link is refused by name.
TEXT_MAX_BYTES = 4 * 1024 * 1024


def _entry_mode(root: Path, rel: str) -> int | None:
    """The mode of `root/rel` (None when missing) with no link followed on the way or at the end."""
    try:
        fd = _open_nofollow(root, rel, directory=True)
    except FileNotFoundError:
        return None
    try:
        return os.stat(rel.rsplit("/", 1)[-1], dir_fd=fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)


def _open_nofollow(root: Path, rel: str, *, directory: bool = False) -> int:
    """A file descriptor of `root/rel` (a regular file), or with `directory` of its parent directory,
    every component opened with O_NOFOLLOW. TaskError naming the path when a component is a link."""
    parts = rel.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise TaskError(f"{root / '/'.join(parts[:i + 1])}: a symbolic link or not a directory: refused "
                                    "(task files are read without following links)") from None
                raise
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    if directory:
        return fd
    try:
        leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TaskError(f"{root / rel}: a symbolic link: refused (task files are read without following links)") from None
        raise
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(leaf).st_mode):
        os.close(leaf)
        raise TaskError(f"{root / rel}: not a regular file: refused")
    return leaf


def read_task_file(root: Path, rel: str, limit: int = TEXT_MAX_BYTES) -> bytes:
    """`root/rel`'s bytes, read without following any link; TaskError naming it otherwise."""
    try:
        fd = _open_nofollow(root, rel)
    except FileNotFoundError:
        raise TaskError(f"{root / rel}: missing") from None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TaskError(f"{root / rel}: over {limit} bytes")
    return data


def is_task_dir(path: str | Path) -> bool:
    p = Path(path)
    return p.is_dir() and _entry_mode(p, "task.toml") is not None and _entry_mode(p, "instruction.md") is not None


def task_dirs(path: str | Path) -> list[Path]:
    """One task directory, or every task directory directly under `path`."""
    p = Path(path)
    if is_task_dir(p):
        return [p]
    if not p.is_dir():
        raise TaskError(f"{path}: not a directory")
    found = sorted(d for d in p.iterdir() if is_task_dir(d))
    if not found:
        raise TaskError(f"{path}: neither a Harbor task (task.toml and instruction.md) nor a directory of them")
    return found


def spec_id(name: str) -> str:
    """The task directory's name when it is a valid spec id, else a slug of it."""
    if re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.[A-Za-z0-9_-]){0,59}", name):
        return name
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return (slug or "task")[:60].strip("-")


def load(path: str | Path) -> HarborTask:
    p = Path(path)
    if not is_task_dir(p):
        raise TaskError(f"{path}: not a Harbor task directory (needs task.toml and instruction.md)")
    try:
        config = tomllib.loads(read_task_file(p, "task.toml").decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{p / 'task.toml'}: {exc}") from None
    try:
        instruction = read_task_file(p, "instruction.md").decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise TaskError(f"{p / 'instruction.md'}: {exc}") from None
    if not instruction:
        raise TaskError(f"{p / 'instruction.md'} is empty")
    read_task_file(p, "tests/test.sh")  # the verifier: present, a regular file, no link on the way
    env = config.get("environment") or {}
    has_dockerfile = _entry_mode(p, "environment/Dockerfile") is not None
    if not has_dockerfile and not env.get("docker_image"):
        raise TaskError(f"{p}: neither environment/Dockerfile nor environment.docker_image in task.toml")
    workdir = DEFAULT_WORKDIR
    if has_dockerfile:
        for line in read_task_file(p, "environment/Dockerfile").decode("utf-8", "replace").splitlines():
            match = re.match(r"\s*WORKDIR\s+(\S+)", line, re.IGNORECASE)
            if match:
                workdir = match.group(1).strip("\"'")
    task = HarborTask(path=p, name=p.name, instruction=instruction, config=config, workdir=workdir,
                      has_solution=_entry_mode(p, "solution/solve.sh") is not None)
    task.unmapped = _unmapped(task)
    return task


def _unmapped(task: HarborTask) -> list[str]:
    out = []
    for section, value in task.config.items():
        if isinstance(value, dict) and section != "metadata":
            for key, inner in value.items():
                if (section, key) in MAPPED_TOML or ((section, key) in EMPTY_OK and not inner):
                    continue
                out.append(f"task.toml [{section}] {key} = {inner!r}: no svc equivalent")
        elif (section,) not in MAPPED_TOML:
            out.append(f"task.toml {section} = {value!r}: no svc equivalent")
    env = task.config.get("environment") or {}
    if env.get("allow_internet") is False:
        out.append("task.toml [environment] allow_internet = false: svc sandboxes have no internet anyway "
                   "(network.egress allows what the spec lists)")
    elif env.get("allow_internet"):
        out.append("task.toml [environment] allow_internet = true: svc sandboxes reach only what network.egress "
                   "allows; add hosts there if the agent or the verifier needs them")
    if (task.path / "environment" / "docker-compose.yaml").is_file() or (task.path / "environment" / "docker-compose.yml").is_file():
        out.append("environment/docker-compose.yaml: svc builds environment/Dockerfile only; declare other "
                   "containers as services: in the spec")
    if in_workspace(task.workdir):
        out.append(f"WORKDIR {task.workdir}: svc mounts the sandbox's workspace over /workspace, so what the "
                   "Dockerfile puts there is hidden; put it in another directory (such as /app)")
    if not task.has_solution:
        out.append("solution/solve.sh is missing: no oracle")
    return out


def _tests_archive(task: HarborTask) -> str:
    """tests/ as base64 of a gzipped tar (it travels inside the check's command)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, is_dir in _tree(task.path, "tests"):
            arcname = rel[len("tests/"):]
            if is_dir:
                info = tarfile.TarInfo(arcname)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            data = read_task_file(task.path, rel, TESTS_MAX_BYTES * 8)
            info = tarfile.TarInfo(arcname)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    if buf.tell() > TESTS_MAX_BYTES:
        raise TaskError(f"{task.path / 'tests'}: {buf.tell()} bytes compressed, over the {TESTS_MAX_BYTES} that travel "
                        "inside the verifier's check (the spec is at most 1 MiB): move large test data into environment/")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _tree(root: Path, top: str) -> list[tuple[str, bool]]:
    """(relative path, is a directory) of everything under `root/top`, sorted; a link anywhere (or a
    FIFO, a device) is refused by name: nothing is followed."""
    out: list[tuple[str, bool]] = []
    pending = [top]
    while pending:
        rel = pending.pop()
        fd = _open_nofollow(root, rel + "/.", directory=True)
        try:
            names = sorted(os.listdir(fd))
            for name in names:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                child = f"{rel}/{name}"
                if stat.S_ISDIR(mode):
                    out.append((child, True))
                    pending.append(child)
                elif stat.S_ISREG(mode):
                    out.append((child, False))
                else:
                    kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                    raise TaskError(f"{root / child}: {kind}: refused (task files are read without following links)")
        finally:
            os.close(fd)
    return sorted(out)


def verifier_command(task: HarborTask) -> str:
    """After the agent (whose processes are stopped by then): /tests and /logs/verifier made afresh, so
    nothing the agent left there is read; tests/ unpacked into /tests; test.sh run in WORKDIR. Passes
    when test.sh exits 0 and the reward it wrote is 1."""
    wd = shlex.quote(task.workdir)
    return "\n".join([
        "rm -rf /tests /logs/verifier; if [ -L /logs ] || { [ -e /logs ] && [ ! -d /logs ]; }; then rm -rf /logs; fi",
        "mkdir -p /tests /logs/verifier",
        f"printf %s {_tests_archive(task)} | base64 -d | tar -xzf - -C /tests",
        f"cd {wd} && bash /tests/test.sh > /logs/verifier/test-output.txt 2>&1",
        "status=$?; echo \"test.sh exited $status\"; tail -n 20 /logs/verifier/test-output.txt",
        "if [ \"$status\" -ne 0 ]; then echo 'test.sh failed: the task fails whatever reward it wrote'; exit 1; fi",
        "if [ -f /logs/verifier/reward.txt ]; then r=$(tr -d ' \\n\\r' < /logs/verifier/reward.txt)",
        "elif [ -f /logs/verifier/reward.json ]; then r=$(sed -n 's/.*\"reward\"[^0-9.-]*\\([0-9.eE+-]*\\).*/\\1/p' "
        "/logs/verifier/reward.json | head -n 1)",
        "else echo 'no reward: test.sh wrote neither /logs/verifier/reward.txt nor reward.json'; exit 2; fi",
        "echo \"reward: $r\"",
        "awk -v r=\"$r\" 'BEGIN { exit !(r + 0 == 1) }'",
    ])


def in_workspace(workdir: str) -> bool:
    return workdir.rstrip("/") == "/workspace" or workdir.startswith("/workspace/")


def setup_command(task: HarborTask) -> str:
    wd = shlex.quote(task.workdir)
    if in_workspace(task.workdir):
        return f"mkdir -p /tests /logs/verifier /logs/agent {wd}"
    return (f"mkdir -p /tests /logs/verifier /logs/agent && if [ -d {wd} ] && [ ! -L {wd} ]; then "
            f"cp -a {wd}/. /workspace/ && rm -rf {wd}; fi && mkdir -p \"$(dirname {wd})\" && ln -sfn /workspace {wd}")


def _duration(seconds: Any) -> str | None:
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return None
    return f"{max(1, int(round(value)))}s"


def to_spec(task: HarborTask, *, oracle: bool = False, agent: dict[str, Any] | None = None) -> dict[str, Any]:
    """The svc spec document of `task`. `oracle`: its agent runs solution/solve.sh in WORKDIR;
    `agent`: an agent block of your own; neither: no agent (give one when running it)."""
    cfg = task.config
    env = cfg.get("environment") or {}
    agent_timeout = _duration((cfg.get("agent") or {}).get("timeout_sec"))
    verifier_timeout = _duration((cfg.get("verifier") or {}).get("timeout_sec"))
    meta = cfg.get("metadata") or {}
    description = f"Harbor task {task.name}"
    if meta:
        description += " (" + ", ".join(f"{k}: {v}" for k, v in meta.items()) + ")"
    doc: dict[str, Any] = {
        "version": 1,
        "id": spec_id(task.name),
        "description": description,
        "base": env.get("docker_image") if _entry_mode(task.path, "environment/Dockerfile") is None
        else {"build": {"context": "environment", "dockerfile": "Dockerfile"}},
        "task": {"prompt": task.instruction.replace("{{", "{ {")},
    }
    if oracle:
        if not task.has_solution:
            raise TaskError(f"{task.path}: solution/solve.sh is missing: no oracle to run")
        solve = read_task_file(task.path, "solution/solve.sh").decode("utf-8", "replace")
        agent = {"type": "cli", "binary": "bash", "args": ["-c", f"cd {shlex.quote(task.workdir)} && {{\n{solve}\n}}"]}
    if agent is not None:
        doc["agent"] = {**agent, **({"timeout": agent_timeout} if agent_timeout and "timeout" not in agent else {})}
    doc["setup"] = {"commands": [setup_command(task)]}
    check: dict[str, Any] = {"type": "command_exit", "command": verifier_command(task)}
    if verifier_timeout:
        check["timeout"] = verifier_timeout
    doc["invariants"] = {"reward": {"description": "tests/test.sh writes reward 1", "check": check}}
    resources: dict[str, Any] = {}
    if env.get("cpus"):
        resources["cpus"] = float(env["cpus"])
    if env.get("memory_mb"):
        resources["memory"] = f"{int(env['memory_mb'])}MiB"
    if env.get("storage_mb"):
        resources["disk"] = f"{int(env['storage_mb'])}MiB"
    if resources:
        doc["resources"] = resources
    return doc


def spec_yaml(task: HarborTask, **kwargs: Any) -> str:
    """The spec as YAML, all of it from the emitter: no task text in comments (a TOML key holding a
    newline would have added keys), what was not mapped is reported by the caller, not written here."""
    return yaml.safe_dump(to_spec(task, **kwargs), sort_keys=False, allow_unicode=True, width=1000)


# --- export ----------------------------------------------------------------------------------------


def export(doc: dict[str, Any], files: dict[str, bytes], out: Path) -> list[str]:
    """Write a spec as a Harbor task directory where it can: its prompt, its Dockerfile build (or
    base image), its timeouts and resources, and its command checks as tests/test.sh (reward 1
    when every one passes). Returns what could not be exported."""
    notes: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    (out / "instruction.md").write_text(str((doc.get("task") or {}).get("prompt", "")).rstrip() + "\n")
    base = doc.get("base")
    env_dir = out / "environment"
    env_dir.mkdir(exist_ok=True)
    toml = ['version = "1.0"', "", "[metadata]", f'svc_spec = "{doc.get("id", "")}"', ""]
    agent = doc.get("agent") or {}
    if isinstance(agent.get("timeout"), str):
        toml += ["[agent]", f"timeout_sec = {_seconds(agent['timeout'])}", ""]
    if isinstance(base, dict):
        build = base.get("build") or {}
        context = str(build.get("context") or ".").strip("/")
        prefix = "" if context in ("", ".") else context + "/"
        for path, data in files.items():
            if path.startswith(prefix):
                target = env_dir / path[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        if build.get("args"):
            notes.append("base.build.args: Harbor has no build arguments (set them as ARG defaults)")
    else:
        (env_dir / "Dockerfile").write_text(f"FROM {base}\nWORKDIR /workspace\n")
    resources = doc.get("resources") or {}
    env_lines = []
    if resources.get("cpus"):
        env_lines.append(f"cpus = {resources['cpus']}")
    for key, name in (("memory", "memory_mb"), ("disk", "storage_mb")):
        if resources.get(key):
            env_lines.append(f"{name} = {_mib(resources[key])}")
    if env_lines:
        toml += ["[environment]", *env_lines, ""]
    (out / "task.toml").write_text("\n".join(toml))
    checks = []
    for name, inv in (doc.get("invariants") or {}).items():
        check = (inv or {}).get("check") or {}
        if check.get("type") == "command_exit":
            checks.append((name, check["command"], int(check.get("expect_exit_code", 0))))
        else:
            notes.append(f"invariants.{name}: a {check.get('type')} check has no Harbor form (only command_exit checks are exported)")
    tests = out / "tests"
    tests.mkdir(exist_ok=True)
    script = ["#!/bin/bash", "# svc runs its checks in /workspace", "cd /workspace 2>/dev/null || true", "ok=1"]
    for name, command, code in checks:
        script += [f"# {name}", f"( {command}\n) ; [ $? -eq {code} ] || ok=0"]
    script += ["mkdir -p /logs/verifier", "echo $ok > /logs/verifier/reward.txt"]
    (tests / "test.sh").write_text("\n".join(script) + "\n")
    (tests / "test.sh").chmod(0o755)
    for key in ("services", "fixtures", "forbidden", "score_rules", "models", "secrets"):
        if doc.get(key):
            notes.append(f"{key}: no Harbor equivalent, not exported")
    if agent and agent.get("type") != "cli":
        notes.append(f"agent ({agent.get('type')}): Harbor tasks name no agent")
    return notes


def _seconds(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
    if not match:
        return 600.0
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def _mib(text: Any) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*", str(text), re.IGNORECASE)
    if not match:
        return 0
    value, unit = float(match.group(1)), (match.group(2) or "B").upper().rstrip("B").rstrip("I")
    return int(value * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}[unit] / 1024**2)
