"""Harbor tasks (the Terminal-Bench team's format) as svc specs.

A Harbor task is a directory:

    instruction.md          the prompt                          -> task.prompt
    task.toml               timeouts, resources, metadata       -> agent.timeout, the verifier's timeout,
                                                                   resources.cpus / memory / disk, the description
    environment/Dockerfile  the image                           -> base: {build: {context: environment}}
    tests/test.sh           the verifier, writes a reward to    -> the `custom` invariant `reward`: after the agent,
                            /logs/verifier/reward.json|txt         tests/ is unpacked into /tests and test.sh runs
                                                                   through its shebang in WORKDIR with [environment.env]
                                                                   and [verifier.env]; the reward is the score (REWARD_AWK)
    solution/               the oracle                          -> with oracle=True, the agent: unpacked into /solution,
                                                                   solve.sh run through its shebang with [solution.env]

Harbor runs the agent, the oracle and the verifier in WORKDIR ([environment] workdir, else the image's
WorkingDir: the generated setup reads it from the running container, whose init process starts in it,
so an ARG or a multi-stage build is no guess; /app for an image without one). svc's file audit, state
and diff cover /workspace, so setup moves the WORKDIR's content into /workspace and leaves WORKDIR as a
link to it: everything done "in /app" is done in the workspace; a WORKDIR under /workspace stays, and
the image's files there are copied into the workspace at boot (base.build.image_workspace: for a
Dockerfile whose final WORKDIR is written under /workspace, and always for a docker_image task). A task
with only [environment] docker_image is built `FROM` it, so it starts as a Dockerfile task does: the
image's ENTRYPOINT starts the container as in Harbor (base.build.image_entrypoint); [agent] user (the oracle) and [verifier] user run
solve.sh and test.sh through the toolset's su. Harbor keeps the agent's container as it was for the
verifier (a server the agent started answers test.sh); svc stops the agent's processes before the
verifier unless asked (`keep_agent_processes`, `svc eval run TASK --keep-agent-processes`), because a
process left running can write the reward file after test.sh (Harbor's own trust level). The tests
travel inside the check's command, so the agent never sees them (Harbor uploads them after the agent
finished). Rewards are read as Harbor reads them, a dict of metrics without `reward` scored by their
mean; the task passes at a reward of 1. Whatever cannot be mapped is listed in `unmapped`, per task,
never dropped silently.

Standard library + PyYAML only: the CLI imports this.
"""
from __future__ import annotations

import base64
import contextlib
import errno
import io
import os
import re
import shlex
import shutil
import stat
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_WORKDIR = "/app"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TESTS_MAX_BYTES = 512 * 1024  # tests/, gzipped: it travels base64 inside the spec (SERVICE_MAX_SPEC_BYTES)
SPEC_NAME = "svc-task.yaml"  # the generated spec's file name, in a private directory (staged), never in the task
CONTEXT_MAX_BYTES = 20 * 1024 * 1024  # environment/ together: the daemon's cap on a spec's files (SPEC_FILES_MAX_BYTES)
MAPPED_TOML = {
    ("version",), ("schema_version",), ("metadata",), ("task",), ("agent", "timeout_sec"), ("verifier", "timeout_sec"),
    ("environment", "build_timeout_sec"), ("environment", "cpus"), ("environment", "memory_mb"), ("environment", "storage_mb"),
    ("environment", "allow_internet"), ("environment", "docker_image"), ("environment", "workdir"),
    ("environment", "env"), ("verifier", "env"), ("solution", "env"), ("agent", "user"), ("verifier", "user"),
    ("environment", "healthcheck"),
}
# What svc does with each task.toml key and task file (docs/reference/harbor.md is generated from these:
# docs/gen/harbor_ref.py); a key in MAPPED_TOML must have its line here (tests/unit/test_build_and_harbor.py)
KEY_DOCS: dict[tuple[str, ...], str] = {
    ("version",): "the schema version: read, nothing to map",
    ("schema_version",): "the schema version: read, nothing to map",
    ("metadata",): "the spec's description",
    ("task",): "name, description, keywords, authors: the spec's description; other keys are named as not mapped",
    ("agent", "timeout_sec"): "agent.timeout",
    ("agent", "user"): "the oracle's solve.sh runs as that user (the toolset's su); an agent of `svc tasks run --agent` "
                       "runs as the image's USER (named)",
    ("verifier", "timeout_sec"): "the reward check's timeout",
    ("verifier", "user"): "test.sh runs as that user (the toolset's su)",
    ("verifier", "env"): "exported for test.sh",
    ("solution", "env"): "the oracle's agent.env (with DEBIAN_FRONTEND=noninteractive)",
    ("environment", "build_timeout_sec"): "base.build.timeout",
    ("environment", "cpus"): "resources.cpus",
    ("environment", "memory_mb"): "resources.memory",
    ("environment", "storage_mb"): "resources.disk",
    ("environment", "allow_internet"): "named: svc sandboxes reach only what network.egress allows",
    ("environment", "docker_image"): "without environment/Dockerfile: a Dockerfile `FROM` the image is built, so its "
                                     "ENTRYPOINT and WORKDIR are Harbor's as with a Dockerfile of the task's",
    ("environment", "workdir"): "the WORKDIR the oracle, the agent's files and test.sh use; without it, the image's "
                                "WorkingDir, read at setup from the running container (/app when the image has none)",
    ("environment", "env"): "agent.env, and exported for test.sh",
    ("environment", "healthcheck"): "a setup command run before the agent as Harbor runs it (sh -c in WORKDIR, every "
                                    "interval_sec, failures in start_period_sec not counted, the run errs at step setup "
                                    "after `retries` consecutive failures); seconds are rounded up to whole seconds",
}
UNMAPPED_DOCS: dict[tuple[str, ...], str] = {
    ("environment", "gpus"): "no GPUs in svc sandboxes (0 is accepted)",
    ("environment", "gpu_types"): "no GPUs in svc sandboxes",
    ("environment", "mcp_servers"): "no MCP servers are started (an empty list is accepted)",
    ("environment", "network_mode"): "svc's network.egress decides what the sandbox reaches",
    ("environment", "allowed_hosts"): "give the hosts as network.egress in a spec of your own",
    ("environment", "skills_dir"): "no skills are copied to the agent",
    ("agent", "network_mode"): "one network policy for the whole run",
    ("agent", "env"): "not applied (an empty table is accepted)",
    ("verifier", "network_mode"): "one network policy for the whole run",
    ("steps",): "a multi-step task is refused, naming it",
    ("source",): "not read",
}
FILE_DOCS: dict[str, str] = {
    "instruction.md": "task.prompt",
    "environment/Dockerfile": "base: {build: {context: environment}} with image_entrypoint (and image_workspace for a "
                              "WORKDIR under /workspace)",
    "environment/docker-compose.yaml": "each service other than main with an image: a spec service of that image, by its "
                                       "name, with its environment, command and healthcheck test; a build-only service "
                                       "and keys such as volumes or ports are named as not mapped; without a Dockerfile "
                                       "the task is refused",
    "tests/": "unpacked into /tests after the agent; test.sh's reward is the score, pass at 1",
    "solution/": "the oracle (--oracle, --agent oracle): unpacked into /solution, solve.sh run through its shebang",
    "steps/": "a multi-step task: refused, naming it",
}
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10}")
TOOLBOX = "/.svc-tools/busybox"  # the toolset's static busybox (daemon/sandbox/toolset.py), read-only in every sandbox
# keys that carry no meaning when empty (Harbor writes them out by default)
EMPTY_OK = {("environment", "gpus"), ("environment", "mcp_servers"), ("agent", "env")}
# [task] keys that only describe the task: they go into the spec's description
TASK_DESCRIPTIVE = {"name", "description", "keywords", "authors", "author", "category", "tags", "difficulty"}


class TaskError(ValueError):
    """A directory that is not a usable Harbor task; the message names it and what is missing."""


@dataclass
class HarborTask:
    path: Path
    name: str
    instruction: str
    config: dict[str, Any]
    workdir: str  # [environment] workdir; else the Dockerfile's final WORKDIR as written, else /app (a guess)
    has_solution: bool
    unmapped: list[str] = field(default_factory=list)
    workdir_declared: bool = False  # from task.toml; else the image's WorkingDir is read at setup (WORKDIR_SH)


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
    return p.is_dir() and _entry_mode(p, "task.toml") is not None and (
        _entry_mode(p, "instruction.md") is not None or _entry_mode(p, "steps") is not None)


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
    if "steps" in config or _entry_mode(p, "steps") is not None:
        steps = config.get("steps")
        count = f"{len(steps)} steps" if isinstance(steps, list) else "steps/"
        raise TaskError(f"{p}: a multi-step task ({count}): not mapped: svc runs single-step tasks (one instruction.md, "
                        "one tests/test.sh); Harbor runs each step's instruction, setup and verifier in turn in one "
                        "environment")
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
        if compose_file(p):
            raise TaskError(f"{p}: a multi-container task ({compose_file(p)} without environment/Dockerfile): not mapped: "
                            "svc builds one container from environment/Dockerfile; declare the others as spec services:")
        raise TaskError(f"{p}: neither environment/Dockerfile nor environment.docker_image in task.toml")
    if not has_dockerfile and not (isinstance(env["docker_image"], str) and IMAGE_REF.fullmatch(env["docker_image"])):
        raise TaskError(f"{p / 'task.toml'}: [environment] docker_image = {str(env['docker_image'])[:200]!r}: not an "
                        "image reference (name[:tag][@digest])")
    workdir = DEFAULT_WORKDIR
    if isinstance(env.get("workdir"), str) and env["workdir"].startswith("/"):
        workdir = env["workdir"]  # [environment] workdir: Harbor's own key wins over the Dockerfile
    elif has_dockerfile:  # the final stage's last WORKDIR (each FROM starts again)
        for line in read_task_file(p, "environment/Dockerfile").decode("utf-8", "replace").splitlines():
            if re.match(r"\s*FROM\s", line, re.IGNORECASE):
                workdir = DEFAULT_WORKDIR
            match = re.match(r"\s*WORKDIR\s+(\S+)", line, re.IGNORECASE)
            if match and match.group(1).strip("\"'").startswith("/"):
                workdir = match.group(1).strip("\"'")
    task = HarborTask(path=p, name=p.name, instruction=instruction, config=config, workdir=workdir,
                      has_solution=_entry_mode(p, "solution/solve.sh") is not None,
                      workdir_declared=workdir == env.get("workdir"))
    task.unmapped = _unmapped(task)
    healthcheck_command(task)  # a malformed [environment.healthcheck] is refused here, naming it
    return task


def _unmapped(task: HarborTask) -> list[str]:
    out = []
    for section, value in task.config.items():
        if section == "task" and isinstance(value, dict):
            out += [f"task.toml [task] {key} = {inner!r}: no svc equivalent" for key, inner in value.items()
                    if key not in TASK_DESCRIPTIVE]
        elif isinstance(value, dict) and section != "metadata":
            for key, inner in value.items():
                if (section, key) in MAPPED_TOML or ((section, key) in EMPTY_OK and not inner):
                    continue
                out.append(f"task.toml [{section}] {key} = {inner!r}: no svc equivalent")
        elif (section,) not in MAPPED_TOML:
            out.append(f"task.toml {section} = {value!r}: no svc equivalent")
    env = task.config.get("environment") or {}
    if env.get("workdir") is not None and not (isinstance(env["workdir"], str) and env["workdir"].startswith("/")):
        out.append(f"task.toml [environment] workdir = {env['workdir']!r}: not an absolute path, ignored")
    for section in ("environment", "verifier", "solution"):
        table = (task.config.get(section) or {}).get("env") or {}
        for name, value in (table.items() if isinstance(table, dict) else []):
            if not ENV_NAME.fullmatch(str(name)):
                out.append(f"task.toml [{section}.env] {name!r}: not an environment variable name, left out")
            elif "${" in str(value):
                out.append(f"task.toml [{section}.env] {name}: Harbor fills ${{...}} from the host's environment; svc "
                           "passes the value as written (give host values as spec secrets)")
    if env.get("allow_internet") is False:
        out.append("task.toml [environment] allow_internet = false: svc sandboxes have no internet anyway "
                   "(network.egress allows what the spec lists)")
    elif env.get("allow_internet"):
        out.append("task.toml [environment] allow_internet = true: svc sandboxes reach only what network.egress "
                   "allows; add hosts there if the agent or the verifier needs them")
    out += compose_services(task)[1]
    for section in ("agent", "verifier"):
        user = (task.config.get(section) or {}).get("user")
        if user is not None and user_name(user) is None:
            out.append(f"task.toml [{section}] user = {user!r}: not a user name or id, ignored")
    if not task.has_solution:
        out.append("solution/solve.sh is missing: no oracle")
    return out


def compose_file(root: Path) -> str | None:
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        if _entry_mode(root, f"environment/{name}") is not None:
            return f"environment/{name}"
    return None


SERVICE_NAME = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
# compose keys of a service that svc maps; any other key is named, per service, as not mapped
COMPOSE_MAPPED = {"image", "environment", "command", "healthcheck", "container_name", "restart", "depends_on", "expose",
                  "hostname"}


def qualified(image: str) -> str:
    """An image reference as the engine reads it (`redis` is docker.io/library/redis): spec services
    name their registry."""
    first, _, rest = image.partition("/")
    if not rest:
        return f"docker.io/library/{image}"
    if "." in first or ":" in first or first == "localhost":
        return image
    return f"docker.io/{image}"


def compose_services(task: HarborTask) -> tuple[list[dict[str, Any]], list[str]]:
    """environment/docker-compose.yaml's services other than Harbor's `main` (the agent's container,
    environment/Dockerfile) as spec services (read with no link followed, as YAML data only): each
    one with an `image` a generic service of that image, reached by its name on the sandbox network
    as in compose, with its `environment`, `command` and `healthcheck` test. What cannot be mapped (a
    service that is `build:` only, a name that is not DNS-safe, keys such as volumes or ports) is
    named in the second list, never dropped silently."""
    rel = compose_file(task.path)
    if rel is None:
        return [], []
    try:
        doc = yaml.safe_load(read_task_file(task.path, rel, 256 * 1024))
    except (TaskError, yaml.YAMLError) as exc:
        return [], [f"{rel}: cannot be read as YAML ({str(exc)[:200]}): no service of it is started"]
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict):
        return [], []
    mapped: list[dict[str, Any]] = []
    notes: list[str] = []
    for name, body in sorted(services.items(), key=lambda item: str(item[0])):
        label = str(name)[:60]
        if name == "main" or not isinstance(body, dict):
            continue
        image = body.get("image")
        if not SERVICE_NAME.fullmatch(str(name)):
            notes.append(f"{rel}: service {label!r}: not a DNS-safe name, not started")
            continue
        if not isinstance(image, str) or not IMAGE_REF.fullmatch(image):
            why = "built from a context (build:)" if "build" in body else "no image"
            notes.append(f"{rel}: service {label}: {why}: not started (only services of an image are)")
            continue
        service: dict[str, Any] = {"name": name, "image": qualified(image)}
        env = body.get("environment")
        if isinstance(env, list):
            env = dict(str(item).split("=", 1) for item in env if "=" in str(item))
        if isinstance(env, dict):
            service["env"] = {str(k): _env_text(v).replace("$$", "$") for k, v in env.items()
                              if ENV_NAME.fullmatch(str(k)) and v is not None}
        command = body.get("command")
        if isinstance(command, str):
            command = shlex.split(command)
        if isinstance(command, list) and command and all(isinstance(a, (str, int, float)) for a in command):
            service["command"] = [str(a).replace("$$", "$") for a in command]  # compose's escape of a literal $
        test = (body.get("healthcheck") or {}).get("test") if isinstance(body.get("healthcheck"), dict) else None
        if isinstance(test, list) and len(test) > 1 and test[0] in ("CMD", "CMD-SHELL"):
            test = test[1] if test[0] == "CMD-SHELL" else shlex.join(str(a) for a in test[1:])
        if isinstance(test, str) and test.strip():
            service["healthcheck"] = {"command": test}
        other = sorted(str(k) for k in body if k not in COMPOSE_MAPPED and k != "build")
        if other:
            notes.append(f"{rel}: service {label}: {', '.join(other)} not mapped")
        mapped.append(service)
    return mapped, notes


def user_name(value: Any) -> str | None:
    """task.toml's [agent]/[verifier] user as a user name or numeric id; None when it is neither."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value)
    return text if USER_NAME.fullmatch(text) else None


def as_user(user: str | None, program: str) -> str:
    """A shell line that runs `program` in the WORKDIR (`$wd`, exported by workdir_sh), as `user`
    when given (Harbor's `docker exec -u`): through the toolset's busybox su (HOME, USER and SHELL the
    user's, the rest of the environment kept); a numeric id is looked up in /etc/passwd. Without a
    user: as the container's user."""
    if user is None:
        return f'cd "$wd" && exec {program}'
    inner = shlex.quote(f'cd "$wd" && exec {program}')
    name = shlex.quote(user)
    return (f"u={name}; case \"$u\" in *[!0-9]*) ;; *) u=$({TOOLBOX} awk -F: -v id=\"$u\" '$3 == id {{print $1; exit}}' "
            f"/etc/passwd) ;; esac; [ -n \"$u\" ] || {{ echo 'no user '{name}' in /etc/passwd' >&2; exit 1; }}; "
            f"exec {TOOLBOX} su -s /.svc-tools/bin/sh \"$u\" -c {inner}")


def _archive(task: HarborTask, top: str) -> str:
    """`top`/ (tests/ or solution/) as base64 of a gzipped tar: it travels inside the spec (the
    check's command, the oracle's arguments), read with no link followed (_tree)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, is_dir in _tree(task.path, top):
            arcname = rel[len(top) + 1:]
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
        raise TaskError(f"{task.path / top}: {buf.tell()} bytes compressed, over the {TESTS_MAX_BYTES} that travel "
                        "inside the spec (at most 1 MiB): move large data into environment/")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _tests_archive(task: HarborTask) -> str:
    return _archive(task, "tests")


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


# Rewards as Harbor's verifier reads them, decided in the container by this awk program (the image's
# awk: a Harbor image need not have python). reward.json first: its top-level numbers are the
# metrics (other values ignored, as Harbor does); the reward is its `reward` key, else reward.txt's
# number when that file exists too (Harbor's fallback), else the mean of the metrics (svc's rule for
# a dict of metrics without `reward`; Harbor keeps them apart). reward.txt otherwise. The reward is
# the check's score (clamped to [0, 1]); the check passes when it is at least 1. Whatever it decides
# is one JSON line {passed, score, evidence} for the `custom` check (daemon/scoring/checks/custom.py).
REWARD_AWK = r"""
function esc(v) { gsub(/\\/, "\\\\", v); gsub(/"/, "\\\"", v); gsub(/\t/, "\\t", v); gsub(/\r/, "", v); gsub(/\n/, "\\n", v); return v }
function num(v) { return v ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
function done(passed, score, why,    out, k) {
  out = "{\"passed\": " passed ", \"score\": " score ", \"evidence\": {\"test_exit\": " status
  if (why != "") out = out ", \"error\": \"" esc(why) "\""
  if (source != "") out = out ", \"reward\": " sprintf("%.10g", reward) ", \"reward_from\": \"" source "\""
  if (n > 0) { out = out ", \"metrics\": {"; for (k = 1; k <= n; k++) out = out (k > 1 ? ", " : "") "\"" keys[k] "\": " vals[k]; out = out "}" }
  print out ", \"test_output\": \"" esc(tail) "\"}}"
  exit 0
}
{ tail = tail $0 "\n" }
END {
  n = 0; source = ""
  if (status != 0) done("false", 0, "test.sh exited " status ": the task fails whatever reward it wrote")
  if (json != "") {
    while ((getline line < json) > 0) j = j line "\n"
    if (j !~ /^[ \t\r\n]*\{/) done("false", 0, "reward.json is not a JSON object")
    depth = 0; instr = 0; getval = 0; len = length(j)
    for (i = 1; i <= len; i++) {
      c = substr(j, i, 1)
      if (instr) {
        if (c == "\\") { cur = cur c substr(j, i + 1, 1); i++; continue }
        if (c == "\"") { instr = 0; last = cur; continue }
        cur = cur c; continue
      }
      if (getval && c !~ /[ \t\r\n]/) {
        getval = 0
        if (c ~ /[-0-9]/) {
          v = c
          while (i < len && substr(j, i + 1, 1) ~ /[-+0-9.eE]/) { i++; v = v substr(j, i, 1) }
          if (num(v) && n < 100) { n++; keys[n] = key; vals[n] = sprintf("%.10g", v + 0) }
          continue
        }
      }
      if (c == "\"") { instr = 1; cur = ""; continue }
      if (c == "{" || c == "[") { depth++; continue }
      if (c == "}" || c == "]") { depth--; continue }
      if (c == ":" && depth == 1) { key = last; getval = 1 }
    }
    for (k = 1; k <= n; k++) if (keys[k] == "reward") { reward = vals[k] + 0; source = "reward.json"; break }
    if (source == "" && txt != "") {
      getline t < txt; gsub(/[ \t\r\n]/, "", t)
      if (num(t)) { reward = t + 0; source = "reward.txt" }
    }
    if (source == "" && n > 0) { s = 0; for (k = 1; k <= n; k++) s += vals[k]; reward = s / n; source = "mean of reward.json metrics" }
    if (source == "") done("false", 0, "reward.json holds no number (a reward or metrics)")
  } else if (txt != "") {
    getline t < txt; gsub(/[ \t\r\n]/, "", t)
    if (!num(t)) done("false", 0, "reward.txt holds no number")
    reward = t + 0; source = "reward.txt"
  } else done("false", 0, "no reward: test.sh wrote neither /logs/verifier/reward.json nor reward.txt")
  score = reward < 0 ? 0 : reward > 1 ? 1 : reward
  done(reward >= 1 ? "true" : "false", sprintf("%.10g", score), "")
}
"""


def _exports(env: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in env.items()]


def verifier_command(task: HarborTask) -> str:
    """After the agent (whose processes Harbor keeps, and so does svc: agent.keep_running): /tests and
    /logs/verifier made afresh, so nothing the agent left there is read; tests/ unpacked into /tests;
    test.sh run through its shebang in WORKDIR with [environment.env] and [verifier.env]; its reward
    read as Harbor reads it (REWARD_AWK). A test.sh that exits non-zero fails whatever it wrote."""
    env = {**env_table(task, "environment"), **env_table(task, "verifier")}
    user = user_name((task.config.get("verifier") or {}).get("user"))
    return "\n".join([
        "rm -rf /tests /logs/verifier; if [ -L /logs ] || { [ -e /logs ] && [ ! -d /logs ]; }; then rm -rf /logs; fi",
        "mkdir -p /tests /logs/verifier",
        f"printf %s {_tests_archive(task)} | base64 -d | tar -xzf - -C /tests",
        "chmod +x /tests/test.sh" + ("; chmod -R a+rX /tests; chmod 1777 /logs/verifier" if user else ""),
        f"( {'; '.join([*_exports(env), workdir_sh(task), as_user(user, '/tests/test.sh')])} ) > /logs/verifier/test-output.txt 2>&1",
        "status=$?; json=; txt=",
        "[ -f /logs/verifier/reward.json ] && [ ! -L /logs/verifier/reward.json ] && json=/logs/verifier/reward.json",
        "[ -f /logs/verifier/reward.txt ] && [ ! -L /logs/verifier/reward.txt ] && txt=/logs/verifier/reward.txt",
        "tail -c 2000 /logs/verifier/test-output.txt | tr -d '\\000-\\010\\013-\\037\\177' | "
        f"awk -v status=\"$status\" -v json=\"$json\" -v txt=\"$txt\" {shlex.quote(REWARD_AWK)}",
    ])


def env_table(task: HarborTask, section: str) -> dict[str, str]:
    """`[section.env]` of task.toml as strings (names that are no environment variable names are left
    out and reported in `unmapped`)."""
    table = (task.config.get(section) or {}).get("env") or {}
    if not isinstance(table, dict):
        return {}
    return {str(k): _env_text(v) for k, v in table.items() if ENV_NAME.fullmatch(str(k))}


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def seeds_workspace(task: HarborTask) -> bool:
    """base.build.image_workspace: a WORKDIR under /workspace keeps the image's files there. Only an
    image of the task's own Dockerfile says where its WORKDIR is before it runs; a docker_image's
    files under /workspace are always copied in (a one-off container at boot)."""
    return in_workspace(task.workdir) or not has_build(task)


def in_workspace(workdir: str) -> bool:
    return workdir.rstrip("/") == "/workspace" or workdir.startswith("/workspace/")


def workdir_sh(task: HarborTask) -> str:
    """Shell that sets and exports `wd`, the WORKDIR: [environment] workdir as written, else the
    image's WorkingDir, read from the container's init process (it starts there, image_entrypoint,
    and keeps it: after setup moved that directory it reads `<dir> (deleted)`), which the agent
    cannot change, so the grader's directory is never one the agent chose; /app for an image with
    none."""
    if task.workdir_declared:
        return f"wd={shlex.quote(task.workdir)}; export wd"
    return (f'wd=$({TOOLBOX} readlink /proc/1/cwd 2>/dev/null); wd=${{wd% (deleted)}}; case "$wd" in /?*) ;; *) '
            f"wd={shlex.quote(DEFAULT_WORKDIR)} ;; esac; export wd")


def setup_command(task: HarborTask) -> str:
    """The WORKDIR (declared, or the image's WorkingDir: the container starts in it, image_entrypoint,
    so it is the init process's directory; an image without one starts in / and gets /app) moved
    into /workspace and left as a link to it; a WORKDIR under /workspace stays where it is."""
    return (f"{workdir_sh(task)}; mkdir -p /tests /logs/verifier /logs/agent || exit 1; "
            'case "$wd" in /workspace|/workspace/*) exec mkdir -p "$wd" ;; esac; '
            'if [ -d "$wd" ] && [ ! -L "$wd" ]; then cp -a "$wd/." /workspace/ && rm -rf "$wd" || exit 1; fi; '
            'mkdir -p "$(dirname "$wd")" && ln -sfn /workspace "$wd"')


HEALTHCHECK_DEFAULTS = {"interval_sec": 5.0, "timeout_sec": 30.0, "start_period_sec": 0.0, "start_interval_sec": 5.0,
                        "retries": 3}  # Harbor's HealthcheckConfig


def healthcheck_command(task: HarborTask) -> str | None:
    """[environment.healthcheck] as Harbor runs it before the agent (BaseEnvironment.run_healthcheck,
    Docker HEALTHCHECK semantics): `sh -c COMMAND` in WORKDIR until it exits 0; a failure inside
    start_period_sec waits start_interval_sec and does not count; `retries` consecutive failures
    after it fail the setup, so the run errs (the environment is not ready: nothing the agent did).
    None without a healthcheck; TaskError when it has no command or a value is not a number."""
    hc = (task.config.get("environment") or {}).get("healthcheck")
    if hc is None:
        return None
    if not isinstance(hc, dict) or not isinstance(hc.get("command"), str) or not hc["command"].strip():
        raise TaskError(f"{task.path / 'task.toml'}: [environment.healthcheck] needs a command (a string)")
    values: dict[str, int] = {}
    for key, default in HEALTHCHECK_DEFAULTS.items():
        value = hc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TaskError(f"{task.path / 'task.toml'}: [environment.healthcheck] {key} = {value!r}: "
                            "not a number of at least 0")
        values[key] = int(-(-value // 1))  # whole seconds, rounded up (the toolset's sleep and timeout)
    box, command = TOOLBOX, hc["command"]
    give_up = shlex.quote(f"[environment.healthcheck] failed after {values['retries']} consecutive retries: {command}")
    return "; ".join([
        f"end=$(( $({box} date +%s) + {values['start_period_sec']} )); fails=0",
        "while :; do "
        f"( {workdir_sh(task)}; cd \"$wd\" && exec {box} timeout {max(1, values['timeout_sec'])} sh -c {shlex.quote(command)} )"
        " && exit 0; "
        f"if [ \"$({box} date +%s)\" -lt \"$end\" ]; then {box} sleep {values['start_interval_sec']}; "
        f"else fails=$((fails + 1)); if [ \"$fails\" -ge {max(1, values['retries'])} ]; then echo {give_up} >&2; exit 1; fi; "
        f"{box} sleep {values['interval_sec']}; fi; "
        "done",
    ])


def _duration(seconds: Any) -> str | None:
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return None
    return f"{max(1, int(round(value)))}s"


def to_spec(task: HarborTask, *, oracle: bool = False, agent: dict[str, Any] | None = None,
            keep_agent_processes: bool = False) -> dict[str, Any]:
    """The svc spec document of `task`. `oracle`: its agent runs solution/solve.sh in WORKDIR;
    `agent`: an agent block of your own; neither: no agent (give one when running it)."""
    cfg = task.config
    env = cfg.get("environment") or {}
    agent_timeout = _duration((cfg.get("agent") or {}).get("timeout_sec"))
    verifier_timeout = _duration((cfg.get("verifier") or {}).get("timeout_sec"))
    build_timeout = _duration(env.get("build_timeout_sec"))
    meta = {**{k: v for k, v in (cfg.get("task") or {}).items() if k in TASK_DESCRIPTIVE},
            **(cfg.get("metadata") or {})}
    description = f"Harbor task {task.name}"
    if meta:
        description += " (" + ", ".join(f"{k}: {v}" for k, v in meta.items()) + ")"
    doc: dict[str, Any] = {
        "version": 1,
        "id": spec_id(task.name),
        "description": description,
        # an image without a Dockerfile is built `FROM` it (context_files), so it starts as any other
        "base": {"build": {"context": "environment", "dockerfile": "Dockerfile",
                        **({"timeout": build_timeout} if build_timeout else {}),
                        # Harbor starts the container with its ENTRYPOINT; a WORKDIR under /workspace keeps its files
                        "image_entrypoint": True, **({"image_workspace": True} if seeds_workspace(task) else {})}},
        "task": {"prompt": task.instruction.replace("{{", "{ {")},
    }
    if oracle:
        agent = oracle_agent(task)
    if agent is not None:
        # Harbor keeps what the agent started running for the verifier; svc only when asked (module docstring)
        agent_env = {**env_table(task, "environment"), **(agent.get("env") or {})}
        doc["agent"] = {**agent, **({"timeout": agent_timeout} if agent_timeout and "timeout" not in agent else {}),
                        **({"env": agent_env} if agent_env else {}), "keep_running": agent.get("keep_running", keep_agent_processes)}
    health = healthcheck_command(task)
    doc["setup"] = {"commands": [setup_command(task), *([health] if health else [])]}
    services = compose_services(task)[0]
    if services:
        doc["services"] = services
    check: dict[str, Any] = {"type": "custom", "command": verifier_command(task)}
    if verifier_timeout:
        check["timeout"] = verifier_timeout
    doc["invariants"] = {"reward": {"description": "tests/test.sh's reward (reward.json, else reward.txt) is the "
                                                   "score; the task passes at 1", "check": check}}
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


def oracle_agent(task: HarborTask) -> dict[str, Any]:
    """The oracle as Harbor runs it: solution/ uploaded as a directory to /solution, solve.sh made
    executable and run through its shebang in WORKDIR, with [solution.env] (and DEBIAN_FRONTEND=
    noninteractive unless it says otherwise) on top of [environment.env]."""
    if not task.has_solution:
        raise TaskError(f"{task.path}: solution/solve.sh is missing: no oracle to run")
    read_task_file(task.path, "solution/solve.sh")  # a regular file, no link on the way
    script = "\n".join([
        "set -e",
        "rm -rf /solution && mkdir -p /solution",
        f"printf %s {_archive(task, 'solution')} | base64 -d | tar -xzf - -C /solution",
        "chmod +x /solution/solve.sh",
        workdir_sh(task),
        as_user(user_name((task.config.get("agent") or {}).get("user")), "/solution/solve.sh"),
    ])
    env = {"DEBIAN_FRONTEND": "noninteractive", **env_table(task, "solution")}
    return {"type": "cli", "binary": "sh", "args": ["-c", script], "env": env}


def spec_yaml(task: HarborTask, *, trusted: dict[str, Any] | None = None, **kwargs: Any) -> str:
    """The spec as YAML, all of it from the emitter: no task text in comments (a TOML key holding a
    newline would have added keys), what was not mapped is reported by the caller, not written here.
    A task declares no secrets: a `secrets` key (whose `command:` sources the CLI runs) is refused.
    `trusted`: top-level keys the user gave on the command line (`svc tasks run --agent installed:...`
    adds the provider key as an `env` secret and its models: block), never anything of the task's."""
    doc = to_spec(task, **kwargs)
    if "secrets" in doc:
        raise TaskError(f"{task.path}: a Harbor task's spec declares no secrets")
    doc.update(trusted or {})
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)


# `svc tasks run --agent`: the forms an agent is named in, and the provider key an installed agent reads
AGENT_FORMS = "oracle, installed:NAME@VERSION (with --model), snapshot:NAME or cli:COMMAND"
PROVIDER_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def agent_from_flag(text: str, *, model: str | None = None, max_turns: int | None = None
                    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the agent block, trusted top-level keys) of `svc tasks run --agent TEXT`; (None, {}) for the
    oracle. An installed agent gets its provider's key as an `env` secret (read from the CLI's
    environment, never a command) and a models: block naming that provider. TaskError otherwise."""
    from daemon.spec.blocks import INSTALLED_AGENT_PROVIDERS

    kind, _, rest = text.partition(":")
    if text == "oracle":
        return None, {}
    if kind == "snapshot" and rest:
        return {"type": "snapshot", "snapshot": rest}, {}
    if kind == "cli" and rest.strip():
        return {"type": "cli", "binary": "sh", "args": ["-c", rest]}, {}
    if kind == "installed":
        name, _, version = rest.partition("@")
        if name not in INSTALLED_AGENT_PROVIDERS:
            raise TaskError(f"--agent {text}: no installed agent {name!r} (one of {', '.join(INSTALLED_AGENT_PROVIDERS)})")
        if not version or not model:
            raise TaskError(f"--agent {text}: an installed agent needs its exact version (installed:{name}@VERSION) "
                            "and --model")
        provider = INSTALLED_AGENT_PROVIDERS[name]
        key = PROVIDER_KEYS[provider]
        agent = {"type": "installed", "name": name, "version": version, "model": model,
                 **({"max_turns": max_turns} if max_turns else {})}
        return agent, {"secrets": {key: "env"}, "models": {"providers": {provider: {"key": key}}}}
    raise TaskError(f"--agent {text}: expected {AGENT_FORMS}")


def has_build(task: HarborTask) -> bool:
    """environment/Dockerfile is there (no link followed): the spec's base is its build."""
    return _entry_mode(task.path, "environment/Dockerfile") is not None


def context_files(task: HarborTask) -> dict[str, tuple[bytes, int]]:
    """environment/'s files (the build context) as {"environment/<path>": (bytes, mode)}, read with
    no link followed: a link anywhere in it (or a FIFO, a device) is refused naming it, as every
    other task file is. Empty without environment/Dockerfile (the base is then an image)."""
    if not has_build(task):
        # [environment] docker_image alone: a Dockerfile `FROM` it, so its ENTRYPOINT and WORKDIR are
        # Harbor's (the image reference is checked in load(): one line, no instruction of its own)
        return {"environment/Dockerfile": (f"FROM {task.config['environment']['docker_image']}\n".encode(), 0o644)}
    out: dict[str, tuple[bytes, int]] = {}
    total = 0
    for rel, is_dir in _tree(task.path, "environment"):
        if is_dir:
            continue
        fd = _open_nofollow(task.path, rel)
        with os.fdopen(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode & 0o777
            data = fh.read(CONTEXT_MAX_BYTES + 1 - total)
        total += len(data)
        if total > CONTEXT_MAX_BYTES:
            raise TaskError(f"{task.path / 'environment'}: over {CONTEXT_MAX_BYTES // (1024 * 1024)} MiB together "
                            f"(the daemon's limit for a spec's files); reached at {task.path / rel}")
        out[rel] = (data, mode)
    return out


@contextlib.contextmanager
def staged(task: HarborTask, text: str) -> Iterator[Path]:
    """The generated spec `text` as a file of a private directory of this process's user (mkdtemp:
    mode 0700, an unpredictable name), beside a copy of environment/ read with no link followed
    (context_files). What runs the spec (its upload with the build context, --adaptive's second
    reading of it, the directory secrets resolve against) reads only these: nothing is read from the
    task directory after load(), nothing is written there, and an svc-task.yaml the task ships (or a
    link planted under that name) is never opened. The directory is removed on leaving."""
    files = context_files(task)
    root = Path(tempfile.mkdtemp(prefix="svc-task-"))
    try:
        for rel, (data, mode) in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_new(target, data, mode)
        _write_new(root / SPEC_NAME, text.encode("utf-8"), 0o600)
        yield root / SPEC_NAME
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """A file that did not exist (O_EXCL, no link followed), with exactly `mode`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        os.fchmod(fh.fileno(), mode)


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
    build_timeout = ((base.get("build") or {}).get("timeout") if isinstance(base, dict) else None)
    if build_timeout:
        env_lines.append(f"build_timeout_sec = {_seconds(str(build_timeout))}")
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
        elif check.get("type") == "custom":  # passes when its last line reports "passed": true
            checks.append((name, f"( {check['command']}\n) | tail -n 1 | grep -q '\"passed\": *true'", 0))
        else:
            notes.append(f"invariants.{name}: a {check.get('type')} check has no Harbor form (only command_exit and custom "
                         "checks are exported)")
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
