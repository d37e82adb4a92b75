"""What the client does on the user's machine with a spec before the daemon sees it: the ONE secret
resolver and the fixture-file reader shared by the CLI (`svc eval run`, `svc specs upload`,
`svc runs create`, `svc runs replay`, `svc replicas run`, `svc sandboxes create`), watch mode, the
TUI's launch screen and the MCP server's `svc_eval_run`.

The daemon never runs a command, reads a host file or reads its own environment because a spec
names it (DECISIONS "Spec document shapes"), so:

* **Secrets.** Every declared source except ``dashboard`` is resolved here and the values are sent
  with the request: ``env`` (this process's environment, then ``.env`` / ``.env.local`` in the
  current directory), ``env:OTHER``, ``file:path`` (trailing newline stripped), ``command:cmd``
  (run with ``sh -c``, stdout with the trailing newline stripped, 30 s limit). Relative ``file:``
  paths and commands resolve against the *base directory*: the spec file's directory when a spec
  file is given; the current directory when a command names a stored spec by id (its YAML is
  fetched from the daemon). A secret that cannot be resolved raises :class:`SecretResolutionError`
  naming it (never showing a value), before anything is sent.
* **Fixture files.** Files named by a fixture's ``path:`` (``{path, to?}`` file or directory
  fixtures, ``{service, path}`` SQL files) are read relative to the spec file and uploaded with the
  spec (``POST /v1/specs {name, yaml, files: {relative path: base64}}``). A directory fixture sends
  every file under it; symbolic links that point outside it are skipped. A path that is absolute or
  leaves the spec's directory is not read (the daemon refuses the spec with a 400 naming
  ``fixtures.N.path``), nor is one that is a symbolic link out of the spec's directory.
* **Build contexts.** A Dockerfile base (``base: {build: {context}}``) sends every file of its
  context directory the same way; a symbolic link in it that points outside is refused.

Standard library + PyYAML only: the TUI imports this and must never import ``daemon/``.
"""
from __future__ import annotations

import base64
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Mapping

import yaml

from client.routes import R

COMMAND_TIMEOUT_S = 30.0
# The daemon's limits on files uploaded with a spec (daemon/api/specs.py); checked here first so
# the user gets the message before a large upload.
SPEC_FILES_MAX_BYTES = 20 * 1024 * 1024
SPEC_FILES_MAX_COUNT = 2000
SECRET_SOURCE_HINT = "expected env, env:<NAME>, file:<path>, command:<cmd> or dashboard"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SecretResolutionError(ValueError):
    """A declared secret could not be resolved locally; the message names it (never its value)."""


class SpecFilesError(ValueError):
    """A fixture file named by the spec cannot be read or is over the upload limits."""


# --- secrets -------------------------------------------------------------------------------------


def parse_source(source: str, name: str | None = None) -> tuple[str, str | None]:
    """``"env:OTHER" -> ("env", "OTHER")``, ``"dashboard" -> ("dashboard", None)``; raises
    :class:`SecretResolutionError` for anything else."""
    what = f"secret '{name}'" if name else "secret"
    text = str(source).strip()
    if text in ("env", "dashboard"):
        return text, None
    kind, sep, arg = text.partition(":")
    if not sep or kind not in ("env", "file", "command"):
        raise SecretResolutionError(f"{what} has an unknown source '{source}' ({SECRET_SOURCE_HINT})")
    arg = arg.strip()
    if not arg:
        raise SecretResolutionError(f"{what} has an incomplete source '{source}': nothing after '{kind}:'")
    if kind == "env" and not _ENV_NAME.match(arg):
        raise SecretResolutionError(f"{what} has source '{source}', but '{arg}' is not a valid environment variable name")
    return kind, arg


def _dotenv() -> Mapping[str, str]:
    from client.config import dotenv_values

    return dotenv_values()


def resolve_secret(name: str, source: str, base_dir: Path, *, environ: Mapping[str, str] | None = None,
                   dotenv: Mapping[str, str] | None = None) -> str | None:
    """The value of one secret (None for ``dashboard``: the daemon holds it)."""
    kind, arg = parse_source(source, name)
    if kind == "dashboard":
        return None
    if kind == "env":
        var = arg or name
        env = os.environ if environ is None else environ
        value = env.get(var) or (_dotenv() if dotenv is None else dotenv).get(var)
        if not value:
            raise SecretResolutionError(
                f"secret '{name}' (source {source}) is missing: environment variable {var} is not set"
                " (export it, or put it in .env)"
            )
        return value
    if kind == "file":
        target = Path(os.path.expanduser(arg or ""))
        if not target.is_absolute():
            target = Path(base_dir) / target
        try:
            value = target.read_text(encoding="utf-8").rstrip("\r\n")
        except FileNotFoundError:
            raise SecretResolutionError(f"secret '{name}' (source {source}) is missing: {target} does not exist") from None
        except (IsADirectoryError, PermissionError, UnicodeDecodeError, OSError) as exc:
            raise SecretResolutionError(f"secret '{name}' (source {source}): cannot read {target}: {type(exc).__name__}") from None
        if not value:
            raise SecretResolutionError(f"secret '{name}' (source {source}) is missing: {target} is empty")
        return value
    try:  # command
        proc = subprocess.run(arg or "", shell=True, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, cwd=base_dir)
    except subprocess.TimeoutExpired:
        raise SecretResolutionError(f"secret '{name}' (source {source}): the command did not finish within {COMMAND_TIMEOUT_S:g}s") from None
    except OSError as exc:
        raise SecretResolutionError(f"secret '{name}' (source {source}): the command could not run: {exc.strerror}") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [""])[-1][:200]
        raise SecretResolutionError(
            f"secret '{name}' (source {source}) is missing: the command exited with {proc.returncode}" + (f" ({tail})" if tail else "")
        )
    value = proc.stdout.rstrip("\r\n")
    if not value:
        raise SecretResolutionError(f"secret '{name}' (source {source}) is missing: the command printed nothing")
    return value


def resolve_secrets(declared: Mapping[str, str], base_dir: Path, environ: Mapping[str, str] | None = None,
                    dotenv: Mapping[str, str] | None = None, *, skip: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """Values of every declared secret except ``dashboard`` ones and the names in ``skip`` (values
    the user passes explicitly, e.g. ``--secret NAME=VALUE``)."""
    values: dict[str, str] = {}
    for name, source in declared.items():
        if name in skip:
            continue
        value = resolve_secret(name, source, base_dir, environ=environ, dotenv=dotenv)
        if value is not None:
            values[name] = value
    return values


def probe_secret(name: str, source: str, base_dir: Path) -> tuple[bool, str]:
    """Whether a secret looks resolvable, without running commands or showing a value:
    (ok, note). The launch screen shows this."""
    try:
        kind, arg = parse_source(source, name)
    except SecretResolutionError as exc:
        return False, str(exc)
    if kind == "dashboard":
        return True, "stored in the daemon"
    if kind == "command":
        return True, f"runs `{arg}` here"
    try:
        resolve_secret(name, source, base_dir)
    except SecretResolutionError as exc:
        text = str(exc)
        return False, text.split(" is missing: ", 1)[-1] if " is missing: " in text else text
    return True, f"${arg or name}" if kind == "env" else str(Path(base_dir) / os.path.expanduser(arg or ""))


def declared_secrets(doc: Any) -> dict[str, str]:
    """The ``secrets:`` map of a parsed spec (plain YAML data)."""
    value = doc.get("secrets") if isinstance(doc, Mapping) else None
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {}


# --- fixture files -------------------------------------------------------------------------------


def fixture_key(raw: str) -> str | None:
    """A fixture path in the form the daemon stores it ('/'-separated, relative to the spec file,
    no '.' parts, no trailing '/'; '.' for the spec's directory itself), or None when it is absolute
    or leaves the spec's directory (the daemon refuses those)."""
    text = str(raw).strip().replace("\\", "/")
    if not text or text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        return None
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts) or "."


def fixture_paths(doc: Any) -> list[tuple[int, str, bool]]:
    """(index, path as written, is a SQL file) of every fixture with a ``path:``."""
    fixtures = doc.get("fixtures") if isinstance(doc, Mapping) else None
    out = []
    for index, fixture in enumerate(fixtures if isinstance(fixtures, list) else []):
        if isinstance(fixture, Mapping) and isinstance(fixture.get("path"), str) and "sql" not in fixture:
            out.append((index, fixture["path"], "service" in fixture))
    return out


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def collect_files(doc: Any, spec_dir: Path) -> dict[str, tuple[bytes, int]]:
    """Read every fixture file the spec names: {path relative to the spec's directory: (bytes, mode)}."""
    spec_dir = Path(spec_dir)
    root = spec_dir.resolve()
    files: dict[str, tuple[bytes, int]] = {}
    total = 0

    def add(key: str, path: Path) -> None:
        nonlocal total
        if key in files:
            return
        try:
            data = path.read_bytes()
            mode = path.stat().st_mode & 0o777
        except OSError as exc:
            raise SpecFilesError(f"fixture file {path}: cannot read: {exc.strerror or exc}") from None
        total += len(data)
        if total > SPEC_FILES_MAX_BYTES:
            raise SpecFilesError(f"the spec's fixture files exceed {SPEC_FILES_MAX_BYTES // (1024 * 1024)} MiB together "
                                 f"(the daemon's limit for files uploaded with a spec); reached at {path}")
        if len(files) >= SPEC_FILES_MAX_COUNT:
            raise SpecFilesError(f"the spec's fixtures name more than {SPEC_FILES_MAX_COUNT} files (the daemon's limit)")
        files[key] = (data, mode)

    for key, path in build_context_files(doc, spec_dir):
        add(key, path)
    for index, raw, is_sql in fixture_paths(doc):
        key = fixture_key(raw)
        if key is None:
            continue  # absolute or outside the spec's directory: never read; the daemon's 400 names it
        local = spec_dir / key if key != "." else spec_dir
        real = local.resolve()
        if not _inside(real, root):
            raise SpecFilesError(f"fixtures.{index}.path: '{raw}' is a symbolic link out of the spec's directory "
                                 f"({local} -> {real}); fixture files must be inside {root}")
        if real.is_file():
            add(key, real)
        elif real.is_dir() and not is_sql:
            for dirpath, dirnames, filenames in os.walk(local, followlinks=False):
                dirnames.sort()
                for filename in sorted(filenames):
                    path = Path(dirpath) / filename
                    target = path.resolve()
                    if not _inside(target, real) or not target.is_file():
                        continue  # a symbolic link leaving the directory (or to something not a file)
                    rel = path.relative_to(local).as_posix()
                    add(f"{key}/{rel}" if key != "." else rel, target)
        elif real.is_dir():
            raise SpecFilesError(f"fixtures.{index}.path: '{raw}' is a directory; a SQL fixture names one file")
        else:
            raise SpecFilesError(f"fixtures.{index}.path: '{raw}' not found (looked at {local}); fixture paths are "
                                 "relative to the spec file's directory")
    return files


def build_context_files(doc: Any, spec_dir: Path) -> list[tuple[str, Path]]:
    """(key relative to the spec's directory, file) of every file of a Dockerfile base's build
    context (``base: {build: {context}}``). A build reads nothing outside its context: a context
    that leaves the spec's directory, or a symbolic link in it that points out of it, is refused."""
    base = doc.get("base") if isinstance(doc, Mapping) else None
    build = base.get("build") if isinstance(base, Mapping) else None
    if not isinstance(build, Mapping):
        return []
    raw = str(build.get("context") or ".")
    key = fixture_key(raw)
    if key is None:
        return []  # absolute or '..': never read; the daemon's 400 names base.build.context
    root = Path(spec_dir).resolve()
    local = Path(spec_dir) / key if key != "." else Path(spec_dir)
    real = local.resolve()
    if not _inside(real, root):
        raise SpecFilesError(f"base.build.context: '{raw}' is a symbolic link out of the spec's directory ({local} -> {real})")
    if not real.is_dir():
        raise SpecFilesError(f"base.build.context: '{raw}' is not a directory (looked at {local}); the context is "
                             "relative to the spec file's directory")
    out = []
    for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = Path(dirpath) / name
            target = path.resolve()
            rel = path.relative_to(real).as_posix()
            if not _inside(target, real):
                raise SpecFilesError(f"base.build.context: {rel} is a symbolic link out of the build context "
                                     f"({path} -> {target}); a build reads nothing outside its context")
            if target.is_file():
                out.append((f"{key}/{rel}" if key != "." else rel, target))
    return out


def encode_files(files: Mapping[str, tuple[bytes, int]]) -> dict[str, Any]:
    """The `files` object of a spec upload: base64, or {content, mode} when the mode is not 0644."""
    out: dict[str, Any] = {}
    for key, (data, mode) in sorted(files.items()):
        content = base64.b64encode(data).decode("ascii")
        out[key] = content if mode == 0o644 else {"content": content, "mode": mode}
    return out


def read_spec_text(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8")


def upload_body(path: str | Path, name: str | None = None, text: str | None = None) -> dict[str, Any]:
    """``{name, yaml, files?}`` for ``POST /v1/specs``: the spec file and every fixture file it names."""
    path = Path(path)
    text = read_spec_text(path) if text is None else text
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None  # the daemon's validation reports it with its line
    body: dict[str, Any] = {"name": name or path.stem, "yaml": text}
    files = collect_files(doc, path.parent) if isinstance(doc, Mapping) else {}
    if files:
        body["files"] = encode_files(files)
    return body


async def upload_spec_file(client: Any, path: str | Path, name: str | None = None, text: str | None = None) -> dict[str, Any]:
    """Upload a spec file with its fixture files; returns the spec record (a new version)."""
    return await client.call(R.UPLOAD_SPEC, body=upload_body(path, name, text))


async def stored_spec_secrets(client: Any, spec_id: str, version: int | None = None, *, base_dir: Path | None = None,
                              skip: set[str] | frozenset[str] = frozenset(),
                              environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Resolve the secrets a stored spec declares, here: its YAML comes from the daemon and relative
    ``file:`` paths and commands resolve against ``base_dir`` (default: the current directory)."""
    params = {"version": version} if version else None
    record = await client.call(R.GET_SPEC, query=params, spec_id=spec_id)
    try:
        doc = yaml.safe_load(record.get("yaml") or "")
    except yaml.YAMLError:
        doc = None
    return resolve_secrets(declared_secrets(doc), Path(base_dir) if base_dir else Path.cwd(), environ, skip=skip)


def is_spec_file(arg: str | None) -> bool:
    """True when a command's spec argument names a local YAML file rather than a stored spec id."""
    return bool(arg) and str(arg).endswith((".yaml", ".yml")) and Path(str(arg)).is_file()


async def prepare_spec(client: Any, spec: str, version: int | None = None, *, skip: set[str] | frozenset[str] = frozenset(),
                       resolve: bool = True, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """For commands that take a spec id *or* a spec file (`svc runs create`, `svc replicas run`,
    `svc sandboxes create`): ``{"spec_id", "spec_version", "secrets"}``.

    A spec file (``*.yaml`` / ``*.yml`` that exists) has its secrets resolved relative to its
    directory, then is uploaded with its fixture files as a new version, which is the one used. A
    spec id names a stored spec: its YAML is fetched and its secrets resolve relative to the current
    directory. ``skip`` names secrets given explicitly; ``resolve=False`` resolves none."""
    if is_spec_file(spec):
        if version:
            raise SpecFilesError("--spec-version goes with a stored spec id, not with a spec file (uploading it makes a new version)")
        path = Path(spec)
        text = read_spec_text(path)
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            doc = None
        secrets = resolve_secrets(declared_secrets(doc), path.resolve().parent, environ, skip=skip) if resolve else {}
        record = await upload_spec_file(client, path, path.stem, text)
        return {"spec_id": record["id"], "spec_version": record["version"], "secrets": secrets}
    secrets = await stored_spec_secrets(client, spec, version, skip=skip, environ=environ) if resolve else {}
    return {"spec_id": spec, "spec_version": version, "secrets": secrets}
