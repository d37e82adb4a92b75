"""`svc login`, `svc logout`, `svc configure`: key and connection set-up.

`login` checks the key against the daemon before saving it (`$XDG_CONFIG_HOME/svc/credentials`,
0600); a refused key is not written. `configure` writes the base URL, the timeout and the update
index to `$XDG_CONFIG_HOME/svc/config.toml`. Resolution stays flag > env > .env > config > credentials."""
from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from client.api import ApiError, Client
from client.config import (
    ConfigFileError,
    check_base_url,
    config_path,
    login_credentials_path,
    parse_timeout,
    read_config_file,
    write_config_file,
)
from client.routes import R

MAX_KEY_CHARS = 512


def register(sub: argparse._SubParsersAction) -> None:
    login = sub.add_parser("login", help="check an API key against the daemon and save it (0600)")
    login.add_argument("--api-key", dest="login_key", metavar="KEY", help="the key (default: prompt, or one line on stdin)")
    login.set_defaults(func=login_cmd)

    logout = sub.add_parser("logout", help="forget the key `svc login` saved")
    logout.set_defaults(func=logout_cmd, needs_daemon=False)

    configure = sub.add_parser("configure", help="save the daemon's base URL, the HTTP timeout and the update index in config.toml")
    configure.add_argument("--base-url", dest="set_base_url", metavar="URL", help="http://host:port or unix:///path.sock")
    configure.add_argument("--timeout", dest="set_timeout", metavar="SECONDS", help="HTTP timeout in seconds")
    configure.add_argument("--update-index", dest="set_update_index", metavar="URL",
                           help="the PEP 503 package index `svc update` upgrades from (http:// or https://)")
    configure.add_argument("--unset", action="append", default=[], choices=("base_url", "timeout", "update_index"),
                           help="remove a saved value")
    configure.set_defaults(func=configure_cmd, needs_daemon=False)


def _read_key(args: argparse.Namespace) -> str:
    from client.console import CliError

    key = args.login_key if args.login_key is not None else args.api_key  # `svc --api-key K login` too
    if key is None:
        key = getpass.getpass("API key: ") if sys.stdin.isatty() else sys.stdin.readline()
    key = key.strip()
    if not key:
        raise CliError("no API key given (--api-key KEY, or type it when asked)")
    if len(key) > MAX_KEY_CHARS or any(c.isspace() for c in key):
        raise CliError(f"that is not an API key (no spaces, at most {MAX_KEY_CHARS} characters)")
    return key


def write_secret_file(path: Path, text: str) -> None:
    """Created 0600 before any byte is written."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)


async def login_cmd(args: argparse.Namespace, client: Client) -> int:
    from dataclasses import replace

    from client.console import CliError

    key = _read_key(args)
    async with Client(replace(client.config, api_key=key)) as probe:
        probe.max_attempts, probe.on_retry = client.max_attempts, client.on_retry
        try:
            await probe.call(R.LIST_EXPERIMENTS, query={"limit": 1})
        except ApiError as exc:
            if exc.status in (401, 403):
                raise CliError(f"the daemon at {client.config.base_url} refused that key ({exc.status} {exc.code}); nothing saved")
            raise
    path = login_credentials_path()
    write_secret_file(path, f"SERVICE_API_KEY={key}\n")
    print(f"svc: key accepted by {client.config.base_url}; saved to {path}", file=sys.stderr)
    return 0


async def logout_cmd(args: argparse.Namespace, client: Client) -> int:
    path = login_credentials_path()
    try:
        path.unlink()
    except FileNotFoundError:
        print(f"svc: no saved key ({path} does not exist)", file=sys.stderr)
        return 0
    print(f"svc: removed {path}", file=sys.stderr)
    return 0


def check_index_url(url: str) -> str:
    import urllib.parse

    from client.updates import shown

    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--update-index {shown(url)!r} must be an http:// or https:// URL of a package index")
    return url.strip()


async def configure_cmd(args: argparse.Namespace, client: Client) -> int:
    from client.console import CliError, emit

    try:
        values = dict(read_config_file())
    except ConfigFileError as exc:
        if args.set_base_url is None and args.set_timeout is None and args.set_update_index is None and not args.unset:
            raise CliError(f"{exc} (set a value with svc configure --base-url/--timeout to replace it)")
        backup = config_path().with_name("config.toml.bak")
        config_path().replace(backup)
        print(f"svc: {exc}; replaced it (the old file is {backup})", file=sys.stderr)
        values = {}
    try:
        if args.set_base_url is not None:
            values["base_url"] = check_base_url(args.set_base_url)
        if args.set_timeout is not None:
            values["timeout"] = parse_timeout(args.set_timeout, "--timeout")
        if args.set_update_index is not None:
            values["update_index"] = check_index_url(args.set_update_index)
    except ValueError as exc:
        raise CliError(str(exc))
    for key in args.unset:
        values.pop(key, None)
    if args.set_base_url is not None or args.set_timeout is not None or args.set_update_index is not None or args.unset:
        write_config_file(values)
        print(f"svc: wrote {config_path()}", file=sys.stderr)
    from client.updates import shown

    emit({k: shown(v) if k == "update_index" else v for k, v in values.items()})  # an index's token is not printed
    return 0
