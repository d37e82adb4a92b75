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
    # SERVICE_ENGINE: where sandboxes run, the local Docker engine or a swarm (daemon/sandbox/swarm/);
    # SERVICE_SWARM_MANAGER / _NODES / _IMAGES say where the swarm is (daemon/sandbox/swarm/settings.py)
    engine: str = "docker"
    swarm_manager: str = ""
    swarm_nodes: str = ""
    swarm_images: str = ""
    swarm_cert_path: str = ""  # SERVICE_SWARM_CERT_PATH: ca.pem, cert.pem, key.pem for TLS to the engines
    swarm_ssh_config: str = ""  # SERVICE_SWARM_SSH_CONFIG: the ssh_config for ssh:// engines
    # Team chat (Slack): OAuth app credentials, request signing secret, an optional server-wide bot
    # token, the Web API base (tests and proxies) and the OAuth authorize page. Secrets stay out of repr.
    chat_client_id: str = ""
    chat_client_secret: str = field(default="", repr=False)
    chat_signing_secret: str = field(default="", repr=False)
    chat_bot_token: str = field(default="", repr=False)
    # The one tenant (name or id; empty: the admin tenant `default`) SERVICE_CHAT_BOT_TOKEN posts for:
    # any other tenant needs its own install, so no tenant reaches a workspace it did not install.
    chat_bot_tenant: str = ""
    chat_api_base: str = "https://slack.com/api"
    chat_authorize_url: str = "https://slack.com/oauth/v2/authorize"
    # The address deep links in chat messages open (the proxy in front of svcd); empty: http://127.0.0.1:<port>.
    chat_link_base: str = ""
    # The investigation agent's model (OpenAI-compatible); unset parts fall back to SERVICE_JUDGE_*.
    llm_base_url: str = ""
    llm_api_key: str = field(default="", repr=False)
    llm_model: str = ""
    # Warm sandbox pool (daemon/sandbox/pool.py): sandboxes kept booted per shape (0: no pool), the
    # bound on all of them, seconds a shape may go unused before its pool is drained, and the free
    # memory (MiB) below which nothing is refilled.
    pool_size: int = 2
    pool_max_total: int = 8
    pool_idle_s: float = 300.0
    pool_min_free_mb: int = 512

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
            engine=os.environ.get("SERVICE_ENGINE", "docker"),
            swarm_manager=os.environ.get("SERVICE_SWARM_MANAGER", ""),
            swarm_nodes=os.environ.get("SERVICE_SWARM_NODES", ""),
            swarm_images=os.environ.get("SERVICE_SWARM_IMAGES", ""),
            swarm_cert_path=os.environ.get("SERVICE_SWARM_CERT_PATH", ""),
            swarm_ssh_config=os.environ.get("SERVICE_SWARM_SSH_CONFIG", ""),
            chat_client_id=os.environ.get("SERVICE_CHAT_CLIENT_ID", ""),
            chat_client_secret=os.environ.get("SERVICE_CHAT_CLIENT_SECRET", ""),
            chat_signing_secret=os.environ.get("SERVICE_CHAT_SIGNING_SECRET", ""),
            chat_bot_token=os.environ.get("SERVICE_CHAT_BOT_TOKEN", ""),
            chat_bot_tenant=os.environ.get("SERVICE_CHAT_BOT_TENANT", ""),
            chat_api_base=os.environ.get("SERVICE_CHAT_API_BASE") or "https://slack.com/api",
            chat_authorize_url=os.environ.get("SERVICE_CHAT_AUTHORIZE_URL") or "https://slack.com/oauth/v2/authorize",
            chat_link_base=os.environ.get("SERVICE_CHAT_LINK_BASE", ""),
            llm_base_url=os.environ.get("SERVICE_LLM_BASE_URL") or os.environ.get("SERVICE_JUDGE_BASE_URL", ""),
            llm_api_key=os.environ.get("SERVICE_LLM_API_KEY") or os.environ.get("SERVICE_JUDGE_API_KEY", ""),
            llm_model=os.environ.get("SERVICE_LLM_MODEL") or os.environ.get("SERVICE_JUDGE_MODEL", ""),
            pool_size=_env_int("SERVICE_POOL_SIZE", 2),
            pool_max_total=_env_int("SERVICE_POOL_MAX_TOTAL", 8),
            pool_idle_s=float(_env_int("SERVICE_POOL_IDLE_S", 300)),
            pool_min_free_mb=_env_int("SERVICE_POOL_MIN_FREE_MB", 512),
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
