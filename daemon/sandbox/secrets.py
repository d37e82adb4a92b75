"""Resolving a spec's declared secrets from their five sources (DECISIONS "Spec document shapes").

    API_KEY: env                      the daemon's environment, same name
    DB_PW: "env:OTHER_NAME"           the daemon's environment, another name
    TOKEN: "file:~/.tokens/x"         a file's contents (trailing newline stripped)
    SIGNING: "command:pass show x"    a command's stdout (trailing newline stripped)
    SLACK: dashboard                  the daemon's own secret store (PUT /v1/secrets/{name})

A value passed with the request (`secrets: {NAME: value}`, which is how the CLI sends the ones it
resolved locally) wins over the declared source. A secret that cannot be resolved fails the boot:
there is no fallback. Error messages name the secret and its source, never a value.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Awaitable, Callable, Mapping

COMMAND_TIMEOUT_S = 30.0


class SecretError(Exception):
    pass


async def resolve_secrets(
    declared: Mapping[str, str],
    provided: Mapping[str, str] | None,
    dashboard: Callable[[], Awaitable[Mapping[str, str]]],
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> dict[str, str]:
    """Every declared secret plus every provided one, as {name: value}."""
    from daemon.spec import parse_secret_source

    environ = os.environ if environ is None else environ
    provided = dict(provided or {})
    resolved: dict[str, str] = {}
    dashboard_values: Mapping[str, str] | None = None
    for name, source in declared.items():
        if name in provided:
            value = provided.pop(name)
            if value is None or value == "":
                raise SecretError(f"secret '{name}' was passed with the request but is empty")
            resolved[name] = str(value)
            continue
        kind, arg = parse_secret_source(source)
        if kind == "env":
            var = arg or name
            value = environ.get(var)
            if not value:
                raise SecretError(
                    f"secret '{name}' (source {source}) is missing: environment variable '{var}' is not set"
                    f"{' or empty' if value == '' else ''} in the daemon's environment; set it before starting svcd,"
                    " pass it in the request's secrets, or store it with `PUT /v1/secrets/" + name + "` and use source dashboard"
                )
        elif kind == "file":
            path = Path(os.path.expanduser(arg))
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            try:
                value = path.read_text().rstrip("\r\n")
            except FileNotFoundError:
                raise SecretError(f"secret '{name}' (source {source}) is missing: file {path} does not exist")
            except (PermissionError, IsADirectoryError, UnicodeDecodeError) as exc:
                raise SecretError(f"secret '{name}' (source {source}) cannot be read from {path}: {type(exc).__name__}")
            if not value:
                raise SecretError(f"secret '{name}' (source {source}) is missing: file {path} is empty")
        elif kind == "command":
            value = await _run_command(name, source, arg)
        else:  # dashboard
            if dashboard_values is None:
                dashboard_values = await dashboard()
            value = dashboard_values.get(name)
            if not value:
                raise SecretError(
                    f"secret '{name}' (source dashboard) is missing: store it with `PUT /v1/secrets/{name}` first"
                )
        resolved[name] = value
    for name, value in provided.items():
        if value is None or value == "":
            raise SecretError(f"secret '{name}' was passed with the request but is empty")
        resolved[name] = str(value)
    return resolved


async def _run_command(name: str, source: str, command: str) -> str:
    try:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    except OSError as exc:
        raise SecretError(f"secret '{name}' (source {source}) could not run its command: {exc.strerror}")
    try:
        out, err = await asyncio.wait_for(proc.communicate(), COMMAND_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise SecretError(f"secret '{name}' (source {source}): the command did not finish within {COMMAND_TIMEOUT_S:.0f}s")
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise SecretError(
            f"secret '{name}' (source {source}) is missing: the command exited with {proc.returncode}"
            + (f" ({tail[0][:200]})" if tail[0] else "")
        )
    value = out.decode("utf-8", "replace").rstrip("\r\n")
    if not value:
        raise SecretError(f"secret '{name}' (source {source}) is missing: the command printed nothing")
    return value
