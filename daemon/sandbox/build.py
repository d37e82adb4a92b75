"""Sandbox images built from a Dockerfile (`base: {build: {context, dockerfile, args}}`).

The context is the set of files the CLI uploaded with the spec version under `build.context`
(stored as blobs like fixture files): the daemon never reads a path of its own host because a
spec names it, so a build cannot read outside its context (a `..` or a symbolic link out of it is
refused where the spec is read and where it is uploaded, and only uploaded files exist here).

The image is tagged by the content digest of the context, the Dockerfile and the args
(`localhost/svc-build/<spec>:<digest>`, label `svc.build=<digest>`), so the tag is known before
anything is built: the warm pool's shape key has it, and an image already present under it is
reused without rebuilding. Builds of one tag in this daemon wait for each other.

The build runs through the docker CLI with BuildKit (the engine's API has no BuildKit session
without it: secrets need one). This engine's built-in Dockerfile frontend does not know
`RUN --network=...`, which public task Dockerfiles use (`RUN --network=host pip install ...`):
`--network=host` and `--network=default` are taken out of the line and the step runs on the
build's network (the engine's default bridge, never the host's network: a build step must not
reach services listening on this host); `--network=none` is refused naming its line. The line
numbers of the Dockerfile are kept, so an error names the user's own line.

The operator's CA bundle (SERVICE_BUILD_CA_BUNDLE, default the host's trust store) is given to
every `RUN` as a BuildKit secret mounted over `/etc/ssl/certs/ca-certificates.crt`: package
installs work behind a TLS-intercepting proxy, and the bundle is in no layer of the image.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from daemon.sandbox.models import BootFailure

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.spec.build import Build
    from daemon.sandbox.runtime import SandboxRuntime
    from daemon.spec.models import SpecDocument
    from daemon.store.db import Store

LABEL = "svc.build"
CA_SECRET_ID = "svc_ca_bundle"
CA_TARGET = "/etc/ssl/certs/ca-certificates.crt"
CA_MOUNT = f"--mount=type=secret,id={CA_SECRET_ID},target={CA_TARGET} "
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
LOG_LINES_STREAMED = 2000  # build output lines published per build; the rest is counted
TAIL_LINES = 15
_locks: dict[tuple[int, str], asyncio.Lock] = {}
_cli_found: dict[str, list[str]] = {}  # SERVICE_DOCKER_CLI -> the build command found for it

Progress = Callable[..., None]


def is_build(spec: "SpecDocument | None") -> bool:
    return spec is not None and not isinstance(getattr(spec, "base", None), (str, type(None)))


def build_of(spec: "SpecDocument | None") -> "Build":
    """The spec's `base.build` block (ValueError when its base is an image reference)."""
    from daemon.spec.build import BaseBuild

    if spec is None or not isinstance(spec.base, BaseBuild):
        raise ValueError("the spec's base is an image reference, not a build")
    return spec.base.build


def context_files(spec: "SpecDocument | None", files: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The uploaded files of the spec version under its build context: {path in the context: info}."""
    root = build_of(spec).context_dir()
    if root == ".":
        return dict(files)
    prefix = root + "/"
    return {path[len(prefix):]: info for path, info in files.items() if path.startswith(prefix)}


def build_digest(spec: "SpecDocument | None", files: dict[str, dict[str, Any]]) -> str:
    """The content digest of context + Dockerfile + args: equal digests build equal images."""
    build = build_of(spec)
    material = {
        "files": {path: [info.get("digest"), int(info.get("mode") or 0o644)] for path, info in sorted(files.items())},
        "dockerfile": build.dockerfile_key(), "args": dict(sorted(build.args.items())),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def image_tag(spec_id: str, digest: str) -> str:
    name = re.sub(r"[^a-z0-9._-]+", "-", spec_id.lower()).strip("._-")[:60] or "spec"
    return f"localhost/svc-build/{name}:{digest[:32]}"


async def spec_image(store: "Store", tenant_id: str, spec: "SpecDocument", spec_id: str | None, spec_version: int | None) -> str:
    """The sandbox image of `spec`: its `base`, or the tag its build has (built or not yet)."""
    if isinstance(spec.base, str):
        return spec.base
    from daemon.errors import InvalidRequest
    from daemon.store import specs as spec_store

    if not spec_id or not spec_version:
        raise InvalidRequest("a spec whose base is a build must be uploaded with its build context (svc specs upload)",
                             [{"loc": "base.build", "msg": "no uploaded build context"}])
    files = await spec_store.files(store, tenant_id, spec_id, spec_version)
    return image_tag(spec.id, build_digest(spec, context_files(spec, files)))


# --- the Dockerfile --------------------------------------------------------------------------------


@dataclass
class Instruction:
    line: int  # 1-based line of the instruction's first line
    keyword: str
    text: str  # the instruction as written, continuation lines joined


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions with their first line (comments, blank lines and `\\`
    continuations handled; heredocs are not: this engine's frontend has none)."""
    out: list[Instruction] = []
    current: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not current:
            start = number
        if stripped.endswith("\\"):
            current.append(stripped[:-1].strip())
            continue
        current.append(stripped)
        joined = " ".join(p for p in current if p)
        out.append(Instruction(start, joined.split(None, 1)[0].upper(), joined))
        current = []
    if current:
        joined = " ".join(p for p in current if p)
        out.append(Instruction(start, joined.split(None, 1)[0].upper(), joined))
    return out


_RUN = re.compile(r"^(\s*RUN)(\s+)", re.IGNORECASE)
_NETWORK_FLAG = re.compile(r"--network=(\S+)\s*")


def rewrite(text: str, ca_bundle: bool) -> str:
    """The Dockerfile the engine builds: RUN lines get the CA bundle's secret mount and lose the
    `--network` flags this frontend cannot parse. Every line stays on its number."""
    lines = text.splitlines(keepends=True)
    for ins in instructions(text):
        if ins.keyword != "RUN":
            continue
        index = ins.line - 1
        line = lines[index]
        head = line[:len(line) - len(line.lstrip())] + line.lstrip()
        match = _RUN.match(head)
        if match is None:
            continue
        rest = head[match.end():]
        for net in _NETWORK_FLAG.findall(rest):
            if net not in ("host", "default"):
                raise BootFailure("image", f"Dockerfile line {ins.line}: RUN --network={net} is not supported "
                                           "(svc runs every RUN on the build's network; --network=host and "
                                           "--network=default are accepted)")
        rest = _NETWORK_FLAG.sub("", rest)
        mount = CA_MOUNT if ca_bundle else ""
        lines[index] = match.group(1) + " " + mount + rest
    return "".join(lines)


def from_images(text: str, args: dict[str, str]) -> list[tuple[int, str]]:
    """(line, image) of every FROM naming an image (not `scratch` nor an earlier stage), ARG
    defaults and build args substituted; refs still holding a variable are left to the build."""
    defaults: dict[str, str] = {}
    stages: set[str] = set()
    seen_from = False
    out = []
    for ins in instructions(text):
        words = ins.text.split()
        if ins.keyword == "ARG" and len(words) > 1 and not seen_from:
            name, _, value = words[1].partition("=")
            defaults[name] = args.get(name, value.strip('"'))
        if ins.keyword != "FROM":
            continue
        seen_from = True
        refs = [w for w in words[1:] if not w.startswith("--")]
        if not refs:
            continue
        ref = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                     lambda m: defaults.get(m.group(1), args.get(m.group(1), m.group(0))), refs[0])
        skip = ref.lower() == "scratch" or ref.lower() in stages or "$" in ref
        if len(refs) >= 3 and refs[1].lower() == "as":
            stages.add(refs[2].lower())
        if not skip:
            out.append((ins.line, ref))
    return out


# --- building ----------------------------------------------------------------------------------


def docker_cli(settings: "Settings") -> list[str]:
    """The docker CLI that builds with BuildKit: SERVICE_DOCKER_CLI, else the first found that
    has the buildx plugin or builds with BuildKit itself (the 20.10 CLI of Debian's docker.io)."""
    import subprocess

    configured = (getattr(settings, "docker_cli", "") or "").strip()
    if configured in _cli_found:
        return _cli_found[configured]
    candidates = [configured] if configured else [c for c in (shutil.which("docker"), "/usr/bin/docker") if c]
    seen = set()
    for cli in candidates:
        if cli in seen or not os.path.exists(cli):
            continue
        seen.add(cli)
        try:
            if subprocess.run([cli, "buildx", "version"], capture_output=True, timeout=20).returncode == 0:
                return _cli_found.setdefault(configured, [cli, "buildx", "build", "--load"])
            version = subprocess.run([cli, "version", "--format", "{{.Client.Version}}"], capture_output=True,
                                     text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        major = re.match(r"(\d+)\.", version)
        if major and int(major.group(1)) < 23:  # BuildKit built in; later CLIs need the buildx plugin
            return _cli_found.setdefault(configured, [cli, "build"])
    raise BootFailure("image", "no docker CLI here builds with BuildKit (a Dockerfile base needs one): install the buildx "
                               "plugin or Debian's docker.io CLI, or set SERVICE_DOCKER_CLI to such a docker binary")


async def _run(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                stdin=asyncio.subprocess.DEVNULL)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return 124, "timed out"
    return proc.returncode or 0, out.decode("utf-8", "replace")


async def image_digest_label(cli: str, tag: str) -> str | None:
    """The `svc.build` label of `tag`; None when there is no such image."""
    code, out = await _run([cli, "image", "inspect", "--format", "{{json .Config.Labels}}", tag])
    if code != 0:
        return None
    try:
        return (json.loads(out.strip() or "null") or {}).get(LABEL, "")
    except ValueError:
        return ""


async def ensure_built(*, settings: "Settings", spec: "SpecDocument | None", tag: str, files: dict[str, dict[str, Any]], progress: Progress,
                       timeout_s: float) -> bool:
    """Build `tag` from the spec's uploaded context unless it is there; True when it was built now.
    Raises BootFailure("image", ...) naming the Dockerfile line that failed."""
    cli_argv = await asyncio.to_thread(docker_cli, settings)
    cli = cli_argv[0]
    digest = tag.rsplit(":", 1)[1]
    lock = _locks.setdefault((id(asyncio.get_running_loop()), tag), asyncio.Lock())  # a lock serves one loop
    async with lock:
        label = await image_digest_label(cli, tag)
        if label is not None and label.startswith(digest):
            progress(step="image", image=tag, built=False)
            return False
        work = Path(tempfile.mkdtemp(prefix="svc-build-", dir=_work_root(settings)))
        try:
            dockerfile = await asyncio.to_thread(_materialize, settings, spec, files, work)
            await _check_from(cli, dockerfile, build_of(spec).args, build_of(spec).dockerfile)
            ca = _ca_bundle(settings)
            rewritten = work / "Dockerfile.svc"
            rewritten.write_text(rewrite(dockerfile, ca is not None))
            argv = [*cli_argv, "--progress=plain", "-f", str(rewritten), "-t", tag, "--label", f"{LABEL}={digest}"]
            for name, value in sorted(build_of(spec).args.items()):
                argv += ["--build-arg", f"{name}={value}"]
            if ca is not None:
                argv += ["--secret", f"id={CA_SECRET_ID},src={ca}"]
            argv.append(str(work / "context"))
            progress(step="image", image=tag, building=True)
            await _build(argv, dockerfile, build_of(spec).dockerfile, progress, timeout_s)
        finally:
            await asyncio.to_thread(shutil.rmtree, work, True)
        progress(step="image", image=tag, built=True)
        return True


async def ensure_spec_image(*, settings: "Settings", store: "Store", sb: "SandboxRuntime", progress: Progress, runtime: str = "docker") -> bool:
    """The boot's `image` step for a Dockerfile base: build `sb.image` unless it is there.
    False when the spec's base is an image reference (nothing to build)."""
    import time

    spec = sb.spec
    if spec is None or not is_build(spec):
        return False
    if runtime != "docker":
        raise BootFailure("image", f"a Dockerfile base is built on the local Docker engine; this daemon runs sandboxes on "
                                   f"{runtime}: build the image there and name it in base:")
    if sb.fixture_files is None:
        from daemon.store import specs as spec_store

        sb.fixture_files = (await spec_store.files(store, sb.tenant_id, sb.spec_id, sb.spec_version)
                            if sb.spec_id and sb.spec_version else {})
    files = context_files(spec, sb.fixture_files or {})
    # built under its own tag even when the sandbox runs a layer on top of it (an installed agent's)
    tag = image_tag(spec.id, build_digest(spec, files))
    await ensure_built(settings=settings, spec=spec, tag=tag, files=files, progress=progress,
                       timeout_s=max(60.0, sb.expires - time.time()))
    return True


def _work_root(settings: "Settings") -> str:
    root = Path(settings.home) / "builds"
    root.mkdir(parents=True, exist_ok=True)
    return str(root)


def _ca_bundle(settings: "Settings") -> str | None:
    value = getattr(settings, "build_ca_bundle", DEFAULT_CA_BUNDLE)
    if value is None:
        value = DEFAULT_CA_BUNDLE
    value = str(value).strip()
    if value.lower() in ("", "off", "none"):
        return None
    if not os.path.isfile(value):
        if value == DEFAULT_CA_BUNDLE:
            return None  # no host trust store to give: builds see the image's own
        raise BootFailure("image", f"SERVICE_BUILD_CA_BUNDLE={value}: no such file (the CA bundle given to builds)")
    return value


def _materialize(settings: "Settings", spec: "SpecDocument | None", files: dict[str, dict[str, Any]], work: Path) -> str:
    """Write the uploaded context under `work/context` (only regular files from the blob store:
    nothing there can point outside it); returns the Dockerfile's text."""
    from daemon.agents.blobs import Blobs

    blobs = Blobs(settings.blobs_dir)
    root = work / "context"
    root.mkdir()
    for rel, info in sorted(files.items()):
        parts = rel.split("/")
        if rel.startswith("/") or ".." in parts:
            raise BootFailure("image", f"build context file '{rel}' leaves the context")
        target = root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(blobs.path(info["digest"]), target)
        os.chmod(target, int(info.get("mode") or 0o644) & 0o777)
    key = build_of(spec).dockerfile_key()
    path = root.joinpath(*key.split("/"))
    if not path.is_file():
        raise BootFailure("image", f"base.build.dockerfile '{build_of(spec).dockerfile}' is not among the files uploaded "
                                   f"under the build context '{build_of(spec).context}'")
    return path.read_text(encoding="utf-8", errors="replace")


async def _check_from(cli: str, dockerfile: str, args: dict[str, str], name: str) -> None:
    for line, ref in from_images(dockerfile, args):
        code, _ = await _run([cli, "image", "inspect", "--format", "{{.Id}}", ref])
        if code == 0:
            continue
        code, out = await _run([cli, "pull", "--quiet", ref], timeout=300)
        if code != 0:
            why = (out.strip().splitlines() or ["no output"])[-1][:300]
            raise BootFailure("image", f"{name} line {line}: FROM {ref}: the image is neither on this engine nor pullable "
                                       f"({why}); build or load it first, or point FROM at a local image")


_STEP = re.compile(r"^#(\d+) (\[.*?\] )?(.*)$")
_ERROR = re.compile(r"^#(\d+) ERROR: (.*)$")
_PARSE_LINE = re.compile(r"(?:dockerfile parse error )?line (\d+)", re.IGNORECASE)


async def _build(argv: list[str], dockerfile: str, name: str, progress: Progress, timeout_s: float) -> None:
    env = {**os.environ, "DOCKER_BUILDKIT": "1", "BUILDKIT_PROGRESS": "plain"}
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                stdin=asyncio.subprocess.DEVNULL, env=env)
    titles: dict[str, str] = {}
    failed_step: str | None = None
    tail: list[str] = []
    streamed = 0
    assert proc.stdout is not None

    async def read() -> None:
        nonlocal failed_step, streamed
        async for raw in proc.stdout:  # type: ignore[union-attr]
            line = raw.decode("utf-8", "replace").rstrip().replace(CA_MOUNT, "")  # the user's own line
            if not line:
                continue
            step = _STEP.match(line)
            if step and step.group(1) not in titles and not step.group(3).startswith(("sha256:", "DONE", "ERROR", "CACHED")):
                titles[step.group(1)] = (step.group(2) or "") + step.group(3)
            error = _ERROR.match(line)
            if error:
                failed_step = error.group(1)
            tail.append(line)
            del tail[:-TAIL_LINES]
            if streamed < LOG_LINES_STREAMED:
                progress(step="image", line=line)
                streamed += 1

    try:
        await asyncio.wait_for(read(), timeout_s)
        code = await proc.wait()
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise BootFailure("image", f"the build of {name} did not finish within {int(timeout_s)}s")
    except asyncio.CancelledError:
        proc.kill()
        await proc.wait()
        raise
    if code == 0:
        return
    raise BootFailure("image", failure_message(name, dockerfile, titles.get(failed_step or ""), tail))


def failure_message(name: str, dockerfile: str, title: str | None, tail: list[str]) -> str:
    """`<Dockerfile> line N: <instruction> failed` with the build's last lines."""
    shown = "\n".join(line for line in tail if not line.startswith("-----") and " sha256:" not in line)[-3000:]
    shown = "\n".join(shown.splitlines()[-TAIL_LINES:])
    line = _failed_line(dockerfile, title, tail)
    if line is not None:
        ins = next((i for i in instructions(dockerfile) if i.line == line), None)
        what = ins.text if ins is not None else dockerfile.splitlines()[line - 1].strip()
        return f"the image build failed at {name} line {line}: {what[:300]}\n{shown}"
    return f"the image build of {name} failed:\n{shown}"


def _normal(text: str) -> str:
    return " ".join(w for w in text.split() if not w.startswith("--"))


def _failed_line(dockerfile: str, title: str | None, tail: list[str]) -> int | None:
    if title:
        wanted = _normal(re.sub(r"^\[[^\]]*\]\s*", "", title))
        for ins in instructions(dockerfile):
            if _normal(ins.text) == wanted or (wanted and _normal(ins.text).startswith(wanted.rstrip("."))):
                return ins.line
    for line in reversed(tail):
        if "dockerfile parse error" in line.lower() or "failed to create llb definition" in line.lower():
            match = _PARSE_LINE.search(line)
            if match:
                return int(match.group(1))
    return None
