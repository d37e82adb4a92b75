"""Sandbox images built from a Dockerfile (`base: {build: {context, dockerfile, args}}`).

The context is the set of files the CLI uploaded with the spec version under `build.context`
(stored as blobs like fixture files): the daemon never reads a path of its own host because a
spec names it, so a build cannot read outside its context (a `..` or a symbolic link out of it is
refused where the spec is read and where it is uploaded, and only uploaded files exist here).

The image is tagged by the content digest of the context, the Dockerfile and the args
(`localhost/svc-build/t<tenant hash>/<spec>:<digest>`, label `svc.build=<digest>`), so the tag is known before
anything is built: the warm pool's shape key has it, and an image already present under it is
reused without rebuilding. Builds of one tag in this daemon wait for each other.

The build runs through the docker CLI with BuildKit (the engine's API has no BuildKit session
without it: secrets need one). This engine's built-in Dockerfile frontend does not know
`RUN --network=...`, which public task Dockerfiles use (`RUN --network=host pip install ...`):
`--network=host` and `--network=default` are taken out of the line and the step runs on the
build's network: none at all, unless the operator sets SERVICE_BUILD_NETWORK=bridge (the engine's
default bridge, which reaches this host's docker0 address; never a spec's choice, and never the
host's network); `--network=none` is refused naming its line. The line numbers of the Dockerfile
are kept, so an error names the user's own line.

A Dockerfile is hostile input (dockerfile_issues, checked at upload and again before a build): ADD
of a URL or git source, RUN --mount (BuildKit cache mounts are shared by every build of the engine),
`# syntax=` and images named by address literals are refused naming the line. An image the build
reads (FROM, COPY --from) is on this engine or pulled from SERVICE_BUILD_REGISTRIES; a failed pull's
answer goes to the log, never to the user. Built tags live under the tenant's own prefix.

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


TAG_ROOT = "localhost/svc-build/"


def tenant_prefix(tenant_id: str) -> str:
    """The repository prefix of a tenant's built images: another tenant cannot name them."""
    return f"{TAG_ROOT}t{hashlib.sha256(tenant_id.encode()).hexdigest()[:16]}/"


def image_tag(spec_id: str, digest: str, tenant_id: str) -> str:
    name = re.sub(r"[^a-z0-9._-]+", "-", spec_id.lower()).strip("._-")[:60] or "spec"
    return f"{tenant_prefix(tenant_id)}{name}:{digest[:32]}"


def foreign_build_tag(ref: str, tenant_id: str) -> bool:
    """True when `ref` names a built image (localhost/svc-build/...) that is not this tenant's."""
    return ref.strip().lower().startswith(TAG_ROOT) and not ref.strip().lower().startswith(tenant_prefix(tenant_id))


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
    return image_tag(spec.id, build_digest(spec, context_files(spec, files)), tenant_id)


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


# --- what a build may fetch ----------------------------------------------------------------------

_SUBST = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_SYNTAX = re.compile(r"^\s*#\s*syntax\s*=", re.IGNORECASE)
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")  # git@github.com:owner/repo
DOCKER_HUB = "docker.io"
_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}


def registry_of(ref: str) -> str:
    """The registry a reference is pulled from (lowercase host[:port]; docker.io when unqualified)."""
    first, sep, _ = ref.strip().partition("/")
    if sep and ("." in first or ":" in first or first.lower() == "localhost" or first.startswith("[")):
        host = first.lower()
        return DOCKER_HUB if host in _HUB_ALIASES else host
    return DOCKER_HUB


def _host(registry: str) -> str:
    if registry.startswith("["):
        return registry[1:].split("]", 1)[0]
    if registry.count(":") > 1:  # a bare IPv6 literal
        return registry
    return registry.rsplit(":", 1)[0] if ":" in registry else registry


def literal_refusal(ref: str) -> str | None:
    """Why `ref` may never be fetched: its registry is a loopback, link-local, private or otherwise
    non-public address literal (IPv4 or IPv6, with or without a port), or this host by name."""
    import ipaddress

    registry = registry_of(ref)
    host = _host(registry).split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if re.fullmatch(r"(0x[0-9a-f]+|\d+)(\.(0x[0-9a-f]+|\d+)){0,3}", host):  # 2130706433, 0x7f.1
            return f"its registry {registry} is a numeric address"
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global or ip.is_multicast:
        return f"its registry {registry} is a loopback, link-local or private address"
    return None


def allowed_registries(settings: "Settings | None") -> set[str]:
    raw = str(getattr(settings, "build_registries", "") or "")
    out = set()
    for item in raw.replace(";", ",").split(","):
        item = item.strip().lower().rstrip("/")
        if item:
            out.add(DOCKER_HUB if item in _HUB_ALIASES else item)
    return out


def pull_refusal(ref: str, settings: "Settings | None") -> str | None:
    """Why the engine must not pull `ref` (None: its registry is on the operator's allow-list)."""
    literal = literal_refusal(ref)
    if literal:
        return literal
    registry = registry_of(ref)
    host = _host(registry)
    if host == "localhost" or host.endswith(".localhost"):
        return f"it is not on this engine and its registry {registry} is this host"
    allowed = allowed_registries(settings)
    if registry in allowed:
        return None
    listed = ", ".join(sorted(allowed)) if allowed else "empty: local images only"
    return f"it is not on this engine and its registry {registry} is not one images may be pulled from (SERVICE_BUILD_REGISTRIES: {listed})"


def _substitute(word: str, defaults: dict[str, str], args: dict[str, str]) -> str:
    return _SUBST.sub(lambda m: args.get(m.group(1), defaults.get(m.group(1), m.group(0))), word)


def _flags(words: list[str]) -> tuple[list[str], list[str]]:
    """The leading `--flag` words of an instruction's arguments, and the rest."""
    index = 0
    while index < len(words) and words[index].startswith("--"):
        index += 1
    return words[:index], words[index:]


def fetched_images(text: str, args: dict[str, str]) -> list[tuple[int, str, str]]:
    """(line, what, image) of every image the build reads: FROM (not scratch nor a stage) and
    COPY/ADD --from naming an image; a reference still holding a variable is kept as written."""
    defaults: dict[str, str] = {}
    stages: set[str] = set()
    seen_from = False
    out = []
    for ins in instructions(text):
        keyword, words = ins.keyword, ins.text.split()[1:]
        if keyword == "ONBUILD" and words:
            keyword, words = words[0].upper(), words[1:]
        if keyword == "ARG" and words and not seen_from:
            name, _, value = words[0].partition("=")
            defaults[name] = args.get(name, value.strip('"'))
        elif keyword == "FROM":
            seen_from = True
            flags, refs = _flags(words)
            if refs:
                ref = _substitute(refs[0], defaults, args)
                if len(refs) >= 3 and refs[1].lower() == "as":
                    stages.add(refs[2].lower())
                if ref.lower() != "scratch" and ref.lower() not in stages:
                    out.append((ins.line, "FROM", ref))
        elif keyword in ("COPY", "ADD"):
            flags, _ = _flags(words)
            for flag in flags:
                if flag.lower().startswith("--from="):
                    source = _substitute(flag.split("=", 1)[1], defaults, args)
                    if source.lower() not in stages and not source.isdigit():
                        out.append((ins.line, f"{keyword} --from", source))
    return out


def dockerfile_issues(text: str, args: dict[str, str]) -> list[tuple[int, str]]:
    """(line, why) of everything in a Dockerfile a build refuses before the engine sees it: a
    `# syntax=` directive (a frontend image fetched from a registry), ADD of a URL or git source
    (fetched in the engine's own network namespace), RUN --mount (cache mounts outlive a build and
    are shared by every build of the engine), and images named by a variable nothing sets or
    by a loopback, link-local or private address."""
    out: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.strip() and not raw.strip().startswith("#"):
            break
        if _SYNTAX.match(raw):
            out.append((number, "the '# syntax=' directive makes the engine fetch a Dockerfile frontend from a registry: "
                                "remove it (the engine's built-in frontend builds the file)"))
    defaults: dict[str, str] = {}
    seen_from = False
    for ins in instructions(text):
        keyword, rest = ins.keyword, ins.text.split(None, 1)[1] if len(ins.text.split(None, 1)) > 1 else ""
        if keyword == "ONBUILD" and rest:
            keyword, rest = rest.split(None, 1)[0].upper(), (rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else "")
        words = rest.split()
        if keyword == "ARG" and words and not seen_from:
            name, _, value = words[0].partition("=")
            defaults[name] = args.get(name, value.strip('"'))
        seen_from = seen_from or keyword == "FROM"
        flags, operands = _flags(words)
        if keyword == "RUN" and any(f.lower().startswith("--mount") for f in flags):
            out.append((ins.line, "RUN --mount is not supported (a cache or bind mount is shared by every build of the "
                                  "engine, other tenants' too): install in a plain RUN"))
        if keyword == "ADD":
            body = rest[len(" ".join(flags)):].strip() if flags else rest.strip()
            if body.startswith("["):
                try:
                    operands = [str(o) for o in json.loads(body)]
                except ValueError:
                    pass
            for source in operands[:-1]:
                value = _substitute(source, defaults, args)
                if "://" in value or _SCP_LIKE.match(value) or value.lower().startswith("git@"):
                    out.append((ins.line, f"ADD {source}: a build fetches nothing from the network (the engine would "
                                          "fetch it from its own host, loopback services included): download it into "
                                          "the build context and COPY it"))
                elif "$" in value:
                    out.append((ins.line, f"ADD {source}: a source named by a variable may be a URL; use COPY"))
    for line, what, ref in fetched_images(text, args):
        if "$" in ref:
            out.append((line, f"{what} {ref}: the image is named by a variable no ARG default or build arg sets"))
            continue
        literal = literal_refusal(ref)
        if literal:
            out.append((line, f"{what} {ref}: {literal}; images come from this engine or an allowed registry"))
    return sorted(out)


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
            name = build_of(spec).dockerfile
            for line, why in dockerfile_issues(dockerfile, build_of(spec).args):
                raise BootFailure("image", f"{name} line {line}: {why}")
            await _check_from(cli, dockerfile, build_of(spec).args, name, settings)
            ca = _ca_bundle(settings)
            rewritten = work / "Dockerfile.svc"
            rewritten.write_text(rewrite(dockerfile, ca is not None))
            argv = [*cli_argv, "--progress=plain", "--network", build_network(settings), "-f", str(rewritten), "-t", tag,
                    "--label", f"{LABEL}={digest}"]
            for name, value in sorted(build_of(spec).args.items()):
                argv += ["--build-arg", f"{name}={value}"]
            if ca is not None:
                argv += ["--secret", f"id={CA_SECRET_ID},src={ca}"]
            argv.append(str(work / "context"))
            progress(step="image", image=tag, building=True)
            await asyncio.to_thread(limit_buildkit_cgroup, settings)
            cap = float(getattr(settings, "build_timeout_s", 0) or 0)
            limit = min(timeout_s, cap) if cap > 0 else timeout_s
            own = build_of(spec).timeout
            if own:  # the spec's own, lower limit (base.build.timeout)
                limit = min(limit, float(own))
            await _build(argv, dockerfile, build_of(spec).dockerfile, progress, limit)
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
    if runtime not in ("docker", "swarm"):  # a swarm's driver pushes it to the registry its nodes pull from
        raise BootFailure("image", f"a Dockerfile base is built on the local Docker engine; this daemon runs sandboxes on "
                                   f"{runtime}: build the image there and name it in base:")
    if sb.fixture_files is None:
        from daemon.store import specs as spec_store

        sb.fixture_files = (await spec_store.files(store, sb.tenant_id, sb.spec_id, sb.spec_version)
                            if sb.spec_id and sb.spec_version else {})
    files = context_files(spec, sb.fixture_files or {})
    # built under its own tag even when the sandbox runs a layer on top of it (an installed agent's); a
    # pooled sandbox has no tenant yet: its image, made for the tenant whose request shaped the pool, says whose
    tag = image_tag(spec.id, build_digest(spec, files), sb.tenant_id)
    if not sb.tenant_id and sb.image.startswith(TAG_ROOT):
        prefix = sb.image[:sb.image.find("/", len(TAG_ROOT)) + 1]
        tag = prefix + tag[len(tenant_prefix("")):]
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


async def _check_from(cli: str, dockerfile: str, args: dict[str, str], name: str, settings: "Settings | None" = None) -> None:
    """Every image the build reads is on this engine, or pulled now from an allowed registry. Refused
    references never reach the engine; a failed pull's answer is logged, never shown (it may quote
    whatever the registry's address answered)."""
    import logging

    for line, what, ref in fetched_images(dockerfile, args):
        literal = literal_refusal(ref)
        if literal:
            raise BootFailure("image", f"{name} line {line}: {what} {ref}: {literal}")
        code, _ = await _run([cli, "image", "inspect", "--format", "{{.Id}}", ref])
        if code == 0:
            continue
        refusal = pull_refusal(ref, settings)
        if refusal:
            raise BootFailure("image", f"{name} line {line}: {what} {ref}: {refusal}; build or load it first, or point "
                                       f"{what} at a local image")
        code, out = await _run([cli, "pull", "--quiet", ref], timeout=300)
        if code != 0:
            logging.getLogger("svcd.build").warning("pull of %s failed: %s", ref, out.strip()[-500:])
            raise BootFailure("image", f"{name} line {line}: {what} {ref}: the image is not on this engine and could not "
                                       f"be pulled from {registry_of(ref)} (exit {code}; the registry's answer is in the "
                                       "daemon's log); build or load it first, or point FROM at a local image")


def build_network(settings: "Settings | None") -> str:
    """The network of a build's RUN steps: none, unless the operator chose the engine's bridge."""
    value = str(getattr(settings, "build_network", "none") or "none").strip().lower()
    if value in ("bridge", "default"):
        return "default"
    if value != "none":
        raise BootFailure("image", f"SERVICE_BUILD_NETWORK={value}: builds run on 'none' or 'bridge'")
    return "none"


CGROUP_ROOT = "/sys/fs/cgroup"
BUILDKIT_CGROUP = "docker/buildkit"  # where this engine's BuildKit puts every RUN step (cgroupfs driver)


def limit_buildkit_cgroup(settings: "Settings | None", root: str = CGROUP_ROOT) -> dict[str, str]:
    """Cap memory, pids and CPU of the engine's BuildKit parent cgroup (every RUN step of every build on
    this engine lives under it: the engine's BuildKit ignores per-build --memory/--cpu-*/--cgroup-parent).
    Best effort: a remote engine, a systemd cgroup driver or a read-only cgroupfs leaves it unset.
    Returns {file: value} written."""
    memory = int(getattr(settings, "build_memory", 0) or 0)
    pids = int(getattr(settings, "build_pids", 0) or 0)
    cpus = float(getattr(settings, "build_cpus", 0) or 0)
    docker_host = os.environ.get("DOCKER_HOST", "")
    if docker_host and not docker_host.startswith("unix://"):
        return {}
    v2 = os.path.exists(os.path.join(root, "cgroup.controllers"))
    period = 100000
    wanted: list[tuple[str, str]] = []
    if v2:
        base = os.path.join(root, BUILDKIT_CGROUP)
        if memory > 0:
            wanted += [(os.path.join(base, "memory.max"), str(memory)), (os.path.join(base, "memory.swap.max"), "0")]
        if pids > 0:
            wanted.append((os.path.join(base, "pids.max"), str(pids)))
        if cpus > 0:
            wanted.append((os.path.join(base, "cpu.max"), f"{int(cpus * period)} {period}"))
    else:
        if memory > 0:
            wanted += [(os.path.join(root, "memory", BUILDKIT_CGROUP, "memory.limit_in_bytes"), str(memory))]
        if pids > 0:
            wanted.append((os.path.join(root, "pids", BUILDKIT_CGROUP, "pids.max"), str(pids)))
        if cpus > 0:
            wanted += [(os.path.join(root, "cpu", BUILDKIT_CGROUP, "cpu.cfs_period_us"), str(period)),
                       (os.path.join(root, "cpu", BUILDKIT_CGROUP, "cpu.cfs_quota_us"), str(int(cpus * period)))]
    written = {}
    for path, value in wanted:
        parent = os.path.dirname(path)
        try:
            if not os.path.isdir(parent):
                if not os.path.isdir(os.path.dirname(parent)):
                    continue  # no docker cgroup here: not this engine's host
                os.mkdir(parent)
            with open(path, "w") as handle:
                handle.write(value)
            written[path] = value
        except OSError:
            continue
    return written


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
