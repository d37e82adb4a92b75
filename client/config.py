"""Client configuration: flag, then environment, then .env/.env.local (never overriding the
environment), then `$XDG_CONFIG_HOME/svc/config.toml` (base URL, timeout), then credentials (the
key `svc login` saved, else the daemon's credentials file), then the default."""
from __future__ import annotations

import os
import tomllib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMEOUT_S = 30.0


def default_home() -> Path:
    if os.environ.get("SERVICE_HOME"):
        return Path(os.environ["SERVICE_HOME"]).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "svc"


def default_socket(home: Path) -> Path:
    if os.environ.get("SERVICE_SOCKET"):
        return Path(os.environ["SERVICE_SOCKET"]).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "svc" / "svcd.sock"
    return home / "svcd.sock"


def config_dir() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg).expanduser() / "svc"


def config_path() -> Path:
    return config_dir() / "config.toml"


def login_credentials_path() -> Path:
    """Where `svc login` keeps the key (0600); `svc logout` removes it."""
    return config_dir() / "credentials"


class ConfigFileError(ValueError):
    """config.toml cannot be read or holds a value of the wrong type."""


CONFIG_KEYS = {"base_url": str, "timeout": (int, float), "update_index": str}


def read_config_file(path: Path | None = None) -> dict[str, object]:
    path = path or config_path()
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigFileError(f"{path}: {exc}") from None
    for key, kind in CONFIG_KEYS.items():
        if key in data and (not isinstance(data[key], kind) or isinstance(data[key], bool)):
            raise ConfigFileError(f"{path}: {key} has the wrong type")
    return {k: v for k, v in data.items() if k in CONFIG_KEYS}


def write_config_file(values: dict[str, object], path: Path | None = None) -> Path:
    """A flat TOML file of the known keys (strings and numbers only)."""
    import json

    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# svc client settings (svc configure)"]
    for key in CONFIG_KEYS:
        if key in values and values[key] is not None:
            value = values[key]
            lines.append(f"{key} = {json.dumps(value) if isinstance(value, str) else value}")
    # 0600: an update index URL may carry a token
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write("\n".join(lines) + "\n")
    return path


def check_base_url(url: str) -> str:
    """The URL without its trailing slash; ValueError naming what is wrong."""
    url = url.strip().rstrip("/")
    if url.startswith("unix://"):
        if len(url) <= len("unix://"):
            raise ValueError(f"base URL {url!r}: unix:// needs a socket path")
        return url
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"base URL {url!r} must start with http://, https:// or unix://")
    try:
        parsed.port
    except ValueError:
        raise ValueError(f"base URL {url!r} has an invalid port") from None
    if not parsed.hostname:
        raise ValueError(f"base URL {url!r} has no host")
    return url


def parse_timeout(raw: object, origin: str) -> float:
    """Seconds, or a duration like SPEC's default `30s` (500ms, 2m)."""
    from daemon.spec.durations import parse_duration

    try:
        value = parse_duration(raw.strip() if isinstance(raw, str) else raw)
    except ValueError:
        try:
            value = float(raw)  # type: ignore[arg-type]  # a negative number: named by the range check below
        except (TypeError, ValueError):
            raise ValueError(f"timeout from {origin} must be seconds or a duration like 30s, got {raw!r}") from None
    if not 0 < value <= 3600:
        raise ValueError(f"timeout from {origin} must be between 0 and 3600 seconds, got {raw!r}")
    return value


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        text = path.read_text()
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return values
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[7:]
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def dotenv_values(cwd: Path | None = None) -> dict[str, str]:
    cwd = cwd or Path.cwd()
    merged = read_env_file(cwd / ".env")
    merged.update(read_env_file(cwd / ".env.local"))
    return merged


@dataclass
class ClientConfig:
    base_url: str
    api_key: str | None
    timeout: float
    home: Path
    api_key_source: str

    @property
    def is_unix(self) -> bool:
        return self.base_url.startswith("unix://")

    @property
    def socket_path(self) -> Path | None:
        return Path(self.base_url[len("unix://"):]) if self.is_unix else None

    @property
    def is_local(self) -> bool:
        if self.is_unix:
            return True
        return any(self.base_url.startswith(p) for p in ("http://127.0.0.1", "http://localhost", "http://[::1]"))


def resolve(api_key: str | None = None, base_url: str | None = None, timeout: float | None = None, cwd: Path | None = None,
            use_config_file: bool = True) -> ClientConfig:
    """Raises ValueError (a bad base URL or timeout) or ConfigFileError naming the culprit."""
    dotenv = dotenv_values(cwd)
    config = read_config_file() if use_config_file else {}

    def lookup(name: str) -> tuple[str | None, str]:
        if os.environ.get(name):
            return os.environ[name], "env"
        if dotenv.get(name):
            return dotenv[name], ".env"
        return None, ""

    home_raw, _ = lookup("SERVICE_HOME")
    home = Path(home_raw).expanduser() if home_raw else default_home()
    source = "flag"
    if api_key is None:
        api_key, source = lookup("SERVICE_API_KEY")
    if api_key is None:
        for path, origin in ((login_credentials_path(), "login"), (home / "credentials", "credentials")):
            saved = read_env_file(path).get("SERVICE_API_KEY")
            if saved:
                api_key, source = saved, origin
                break
    if base_url is None:
        base_url, _ = lookup("SERVICE_BASE_URL")
    if base_url is None and config.get("base_url"):
        base_url = str(config["base_url"])
    if base_url is None:
        sock_raw, _ = lookup("SERVICE_SOCKET")
        base_url = "unix://" + str(Path(sock_raw).expanduser() if sock_raw else default_socket(home))
    base_url = check_base_url(base_url)
    if timeout is None:
        raw, origin = lookup("SERVICE_TIMEOUT")
        if raw is None and "timeout" in config:
            raw, origin = config["timeout"], str(config_path())
        timeout = parse_timeout(raw, origin) if raw is not None else DEFAULT_TIMEOUT_S
    else:
        timeout = parse_timeout(timeout, "--timeout")
    return ClientConfig(base_url=base_url, api_key=api_key, timeout=timeout, home=home, api_key_source=source or "none")
