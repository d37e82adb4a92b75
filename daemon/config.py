"""Daemon settings, read once from the environment (prefix SERVICE_)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# The client finds the daemon with the same rules, so they are defined once, in client.config.
from client.config import default_home, default_socket


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}")


def _env_bool(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_switch(name: str, default: bool) -> bool:
    """An on/off setting where a typo must not silently pick a side."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise SystemExit(f"{name} must be on or off, got {raw!r}")


@dataclass
class Settings:
    home: Path = field(default_factory=default_home)
    socket_path: Path | None = None
    port: int = 7878
    auth_disabled: bool = False
    rate_limit_per_s: float = 30.0
    rate_limit_burst: int = 60
    max_body_bytes: int = 32 * 1024 * 1024
    max_upload_bytes: int = 100 * 1024 * 1024
    max_sandboxes: int = 16
    idempotency_ttl_s: int = 24 * 3600  # SERVICE_IDEMPOTENCY_TTL: seconds an Idempotency-Key's answer is replayed
    # SERVICE_STREAM_TIMEOUT: seconds after which GET /v1/runs/{id}/stream closes even if the run goes on
    stream_timeout_s: float = 1800.0
    daemon_id: str = ""
    # host firewall of sandbox networks (daemon/sandbox/firewall.py); off: sandboxes can reach the host
    sandbox_firewall: bool = True
    iptables: str = "iptables"  # SERVICE_IPTABLES: the iptables binary (path or name on PATH)
    ip6tables: str | None = None  # SERVICE_IP6TABLES; None: the one next to `iptables`
    # workspace disk limit enforced by a loop-mounted ext4 per sandbox (daemon/sandbox/diskquota.py);
    # SERVICE_WORKSPACE_QUOTA=off: the workspace size is only checked after commands (a warning)
    workspace_quota: bool = True

    def __post_init__(self) -> None:
        if self.socket_path is None:
            self.socket_path = default_socket(self.home)

    @classmethod
    def from_env(cls) -> "Settings":
        home = default_home()
        rate = os.environ.get("SERVICE_RATE_LIMIT", "30")
        return cls(
            home=home,
            socket_path=default_socket(home),
            port=_env_int("SERVICE_PORT", 7878),
            auth_disabled=_env_bool("SERVICE_AUTH_DISABLED"),
            rate_limit_per_s=float(rate),
            rate_limit_burst=max(1, int(float(rate) * 2)),
            max_body_bytes=_env_int("SERVICE_MAX_BODY_BYTES", 32 * 1024 * 1024),
            max_upload_bytes=_env_int("SERVICE_MAX_UPLOAD_BYTES", 100 * 1024 * 1024),
            max_sandboxes=_env_int("SERVICE_MAX_SANDBOXES", 16),
            idempotency_ttl_s=_env_int("SERVICE_IDEMPOTENCY_TTL", 24 * 3600),
            stream_timeout_s=float(_env_int("SERVICE_STREAM_TIMEOUT", 1800)),
            sandbox_firewall=_env_switch("SERVICE_SANDBOX_FIREWALL", True),
            iptables=os.environ.get("SERVICE_IPTABLES") or "iptables",
            ip6tables=os.environ.get("SERVICE_IP6TABLES") or None,
            workspace_quota=_env_switch("SERVICE_WORKSPACE_QUOTA", True),
        )

    @property
    def db_path(self) -> Path:
        return self.home / "svc.db"

    @property
    def blobs_dir(self) -> Path:
        return self.home / "blobs" / "sha256"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def log_path(self) -> Path:
        return self.logs_dir / "svcd.log"

    @property
    def pid_path(self) -> Path:
        return self.home / "svcd.pid"

    @property
    def credentials_path(self) -> Path:
        return self.home / "credentials"

    @property
    def sandbox_socket_path(self) -> Path:
        """Mounted into sandboxes; only sandbox tokens are accepted on it, even with auth disabled."""
        assert self.socket_path is not None
        return self.socket_path.parent / "sandbox.sock"

    @property
    def workspaces_dir(self) -> Path:
        return self.home / "workspaces"
