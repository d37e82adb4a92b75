"""Client configuration: flag, then environment, then .env/.env.local (never overriding the
environment), then the daemon's credentials file, then the default."""
from __future__ import annotations

import os
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


def resolve(api_key: str | None = None, base_url: str | None = None, timeout: float | None = None, cwd: Path | None = None) -> ClientConfig:
    dotenv = dotenv_values(cwd)

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
        creds = read_env_file(home / "credentials").get("SERVICE_API_KEY")
        if creds:
            api_key, source = creds, "credentials"
    if base_url is None:
        base_url, _ = lookup("SERVICE_BASE_URL")
    if base_url is None:
        sock_raw, _ = lookup("SERVICE_SOCKET")
        base_url = "unix://" + str(Path(sock_raw).expanduser() if sock_raw else default_socket(home))
    base_url = base_url.rstrip("/")
    if not base_url.startswith(("http://", "https://", "unix://")):
        raise ValueError(f"base URL {base_url!r} must start with http://, https:// or unix://")
    if timeout is None:
        raw, _ = lookup("SERVICE_TIMEOUT")
        timeout = float(raw) if raw else DEFAULT_TIMEOUT_S
    return ClientConfig(base_url=base_url, api_key=api_key, timeout=timeout, home=home, api_key_source=source or "none")
